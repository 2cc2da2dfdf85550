#!/usr/bin/env bash
# Issue 26's GPU run: SmolLM2-135M-Instruct through the harness's LLM paths on a machine lent by the
# `device` tool (one CUDA GPU, no network), at sizes the 2-core CPU could not reach:
#   xdial      `harness run --judge hf:smollm2-135m-instruct` P(Yes) on the FULL xDial-Eval sets (10 languages,
#              dialogue then turn level), then the CPU's `--limit 20` subset again (served by the request cache)
#              to compare devices item by item;
#   evaluator  LoRA generative P(Yes) evaluator (bench/smollm2/lora.py evaluator), scored on the full sets;
#   chatbot    chatbot SFT on CCC + `harness chatbot-eval` base vs SFT (ROUGE-L; MiniLM's weights stay here);
#   judge      MEDAL JSON verdicts (bench/smollm2/judge.py medal) and pairwise position bias (pairwise);
#   pipeline   the MEDAL pipeline, SmolLM2 in every role (bench/smollm2/medal.py, the log-prob user judge).
# The parts run at once (one GPU, 16 cores); each has a time limit; every JSON, log, run results.json and
# the per-sample files the report needs land in $OUT. Back here:
#   python bench/smollm2/gpu_report.py --from <collected folder> --write-docs
#
# Staging (the model, wheels and shared data do not fit one call): scripts/device_stage.py, as in
# bench/README.md ("Runs on a lent GPU"): its `setup` launch installs the wheels into /tmp/site and
# unpacks the shared data beside the repository copies; then this script runs as the `llm` launch:
#   python3 scripts/device_stage.py step --chunk .gpu/K --launches scripts/gpu_runs.txt   (its `llm` run)
#
#   SMOKE=1 OUT=/tmp/llm-smoke bash bench/smollm2/gpu.sh     # the same steps, a few items each (CPU)
set -uo pipefail
OUT=${OUT:?set OUT}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu.log") 2>&1
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
PY=${PY:-python3}
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
if [ -z "${SMOKE:-}" ]; then
  STAGED=${STAGED:?set STAGED (scripts/device_stage.py sets it; its run starts after the setup run)}
  export PYTHONPATH=/tmp/site:$PWD DIALEVAL_HOME=/tmp/dialeval-home-llm
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  $PY -c "import torch,transformers,peft,gguf;print('torch',torch.__version__,'cuda',torch.cuda.is_available(),'transformers',transformers.__version__,'peft',peft.__version__,'gguf',gguf.__version__)"
  stamp "materialise"
  $PY -m harness.cli models materialize smollm2-135m-instruct --source "$STAGED/SmolLM2-135M-Instruct.Q4_1.gguf" || exit 4
  EV=(--steps 600 --batch-size 16 --dialogues 3000 --eval-full); SFT=(--steps 300 --batch-size 8 --eval-limit 100)
  LIMIT=(); MEDAL=(--n 5 --per-language 10); PAIRS=5; BATCH=64
  XDIAL_S=${XDIAL_S:-480}; EV_S=${EV_S:-520}; SFT_S=${SFT_S:-420}; JUDGE_S=${JUDGE_S:-420}; PIPE_S=${PIPE_S:-480}
else
  export PYTHONPATH=$PWD
  EV=(--steps 2 --batch-size 2 --dialogues 20 --eval-limit 1); SFT=(--steps 2 --batch-size 2 --eval-limit 2)
  LIMIT=(--limit 1); MEDAL=(--n 1 --per-language 1); PAIRS=1; BATCH=8; SUBSET=1
  XDIAL_S=900; EV_S=900; SFT_S=900; JUDGE_S=900; PIPE_S=900
fi
PIPE=dataset_builders/medal_pipeline/configs/smollm2-logprob.yaml
if [ -n "${SMOKE:-}" ]; then  # one language, two scenes
  sed -e 's/^languages: .*/languages: [en]/' -e 's/n_scenes: 10/n_scenes: 2/' $PIPE > ${PIPE%.yaml}-smoke.yaml
  PIPE=${PIPE%.yaml}-smoke.yaml
fi
H=($PY -m harness.cli)
SRC=../shared/data/xdial-eval
J="hf:smollm2-135m-instruct,dtype=float32,batch_size=$BATCH"

part() { # name seconds command: one part (a bash command line), its own log, its time limit
  local name=$1 secs=$2; shift 2
  ( s=$(date +%s); timeout "$secs" bash -c "$1" > "$OUT/$name.log" 2>&1; rc=$?
    echo "$name rc=$rc $(( $(date +%s) - s ))s" | tee -a "$OUT/parts.txt" ) &
  PIDS+=($!)
}
PIDS=()
R="${H[*]} run --judge $J --source $SRC --quiet"
# dialogue level, the CPU's subset (bench/results/smollm2_judge.json "xdial": --limit 20, to compare the
# devices item by item), then the full turn level (the subset's items come from the request cache)
XDIAL="$R --task xdial-eval-dialogue ${LIMIT[*]} -o $OUT/xdial-dialogue && $R --task xdial-eval --limit ${SUBSET:-20} -o $OUT/xdial-limit20"
XDIAL="$XDIAL && $R --task xdial-eval-turn ${LIMIT[*]} -o $OUT/xdial-turn"
JUDGE="$PY bench/smollm2/judge.py medal ${MEDAL[*]} --max-tokens 192 && $PY bench/smollm2/judge.py pairwise --pairs $PAIRS ${SMOKE:+--pair-languages en}"
stamp "parts start"
part xdial "$XDIAL_S" "$XDIAL"
part evaluator "$EV_S" "$PY bench/smollm2/lora.py evaluator ${EV[*]} --only fine-tuned --judge-options ,dtype=float32,batch_size=$BATCH --no-docs"
part chatbot "$SFT_S" "DIALEVAL_BENCH_RESULTS=$OUT/chatbot-results $PY bench/smollm2/lora.py chatbot ${SFT[*]} --judges metric:rougeL --no-ship --no-docs"
part judge "$JUDGE_S" "$JUDGE"
part pipeline "$PIPE_S" "$PY bench/smollm2/medal.py --config $PIPE --registry $(mktemp -d)/registry"
wait "${PIDS[@]}"   # not a bare `wait`: it would also wait for the log's tee (process substitution)
stamp "parts done"
cat "$OUT/parts.txt"
mkdir -p "$OUT/results"
cp bench/results/smollm2_judge.json bench/results/smollm2_lora.json bench/results/smollm2_medal.json "$OUT/results/" 2>/dev/null
cp "$OUT/chatbot-results/smollm2_lora.json" "$OUT/results/smollm2_lora_chatbot.json" 2>/dev/null
L=bench/out/smollm2_lora
for f in evaluator/dialeval_adapter.json chatbot/dialeval_adapter.json chatbot-eval/results.json; do
  [ -f "$L/$f" ] && cp "$L/$f" "$OUT/results/$(echo "$f" | tr / _)"
done
[ -d "$L/chatbot-eval" ] && cp "$L"/chatbot-eval/*.parquet "$OUT/results/" 2>/dev/null
[ -d "$L/runs/fine-tuned" ] && cp -r "$L/runs/fine-tuned" "$OUT/xdial-fine-tuned"
W=$($PY -c "import yaml;print(yaml.safe_load(open('$PIPE'))['work_dir'])")
W=dataset_builders/medal_pipeline/configs/$W
[ -f "$W/summary.json" ] && cp "$W/summary.json" "$OUT/results/medal_pipeline_summary.json"
find "$OUT" -name "*.sqlite*" -delete
stamp "done"
