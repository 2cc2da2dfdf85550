"""LoRA training throughput of the harness path vs a raw PEFT + torch loop on the same model and batches.

Both sides train the same randomly initialised causal LM (built from a config, no download) with
the same LoRA adapter (peft ``LoraConfig`` r=8, alpha 16, dropout 0 on q/k/v/o projections, same
seed), on the same pre-tokenized, fixed-length synthetic instruction examples in the same order, with
the same loss function object (:func:`finetune.generative.make_answer_loss`), AdamW (lr 1e-4, no
weight decay), linear learning-rate decay and gradient clipping at 1.0:

* **raw**: ``model.train()``; per step ``loss = loss_fn(model, batch)``; ``loss.backward()``;
  ``clip_grad_norm_``; ``opt.step()``; ``sched.step()``; ``opt.zero_grad()`` on pre-collated batches
  (under ``torch.autocast(bf16)`` on a GPU);
* **harness**: :func:`finetune.trainer.train` (accelerate, DataLoader + collate per step, logging,
  checkpoints), the model loaded by :func:`finetune.lora.load_lora_model`.

Samples/s are taken from per-step timestamps (the raw loop's own, the harness's ``on_step``) over the
same window: the steps after ``--warmup`` warm-up steps, up to but excluding the last step, because
the trainer always checkpoints after its last step; a second figure includes that final step (and the
harness's final checkpoint). Each side runs ``--repeats`` times, interleaved in ABBA order (raw,
harness, harness, raw, …); the medians are compared (also reported: the ratio of the median step
times, which a burst of background load moves less). Goal: harness / raw ≥ 0.9. With dropout 0 both
sides do the same work, so their per-step losses must agree (checked on the first 5 steps; a
mismatch also fails the run).

    .venv/bin/python bench/finetune_throughput.py                            # small llama, CPU (~1 min idle)
    .venv/bin/python bench/finetune_throughput.py --threads 1                # on a CPU shared with other jobs
    .venv/bin/python bench/finetune_throughput.py --size 0.5b --device cuda  # Qwen2-0.5B shape, bf16

On a 2-core machine that another job keeps busy, torch's 2 threads per process get descheduled in
bursts (steps 30× slower) and the ratio swings from 0.3 to 2; ``--threads 1`` keeps it stable.

Writes its run into bench/results/finetune_throughput.json (committed; one entry per variant:
device, size and torch threads, so a GPU run and a CPU run sit side by side) and, with
``--write-docs``, the table in bench/README.md rendered from it (``--docs-only`` rewrites the table
from the committed JSON); the full run detail goes to ``--out`` (bench/out/, git-ignored). Exits 1
when the goal is missed.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from contextlib import nullcontext
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GOAL = 0.9
LR = 1e-4
LORA = {"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]}
LOSS_CHECK_STEPS = 5


# -- model and data --------------------------------------------------------------------------------
def build_model_dir(root: Path, size: str, seed: int) -> tuple[Path, dict[str, Any]]:
    """Write a random-weight causal LM (+ the tiny tokenizer for the default size) to ``root``."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    from tests.fixtures.tiny_models import build_tokenizer

    if size == "small":
        tok = build_tokenizer(root)
        config = LlamaConfig(
            vocab_size=len(tok),
            hidden_size=256,
            intermediate_size=1024,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=4,
            head_dim=64,
            max_position_embeddings=2048,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
            tie_word_embeddings=False,
        )
        info = {"pad_id": tok.pad_token_id, "answer_ids": tok.convert_tokens_to_ids(["Yes", "No"])}
        dtype = torch.float32
    elif size == "0.5b":  # Qwen2-0.5B's shape (random weights, no tokenizer needed)
        config = Qwen2Config(
            vocab_size=151936,
            hidden_size=896,
            intermediate_size=4864,
            num_hidden_layers=24,
            num_attention_heads=14,
            num_key_value_heads=2,
            max_position_embeddings=32768,
            rope_theta=1_000_000.0,
            tie_word_embeddings=True,
            bos_token_id=151643,
            eos_token_id=151645,
            pad_token_id=151643,
        )
        info = {"pad_id": 151643, "answer_ids": [9454, 2753]}
        dtype = torch.bfloat16
    else:
        raise ValueError(size)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.save_pretrained(str(root), safe_serialization=True)
    info |= {
        "model_type": config.model_type,
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "layers": config.num_hidden_layers,
        "heads": config.num_attention_heads,
        "kv_heads": config.num_key_value_heads,
        "base_parameters": sum(p.numel() for p in model.parameters()),
    }
    del model
    return root, info


def synthetic_rows(n: int, seq_len: int, vocab: int, answer_ids: list[int], seed: int) -> list[dict]:
    """Fixed-length examples: ``seq_len - 1`` prompt tokens (labels -100) + a Yes/No answer token."""
    import numpy as np

    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        prompt = rng.integers(8, vocab, size=seq_len - 1).tolist()
        ans = answer_ids[i % 2]
        rows.append({"input_ids": prompt + [ans], "labels": [-100] * (seq_len - 1) + [ans]})
    return rows


def data_order(n: int, batch_size: int, total_steps: int, seed: int) -> list[list[int]]:
    """The example indices of each step: the trainer's documented order (a permutation per epoch from
    ``numpy.random.default_rng([seed, epoch])``, cut into batches), replicated here."""
    import numpy as np

    steps, epoch = [], 0
    while len(steps) < total_steps:
        order = np.random.default_rng([seed, epoch]).permutation(n).tolist()
        steps += [order[i : i + batch_size] for i in range(0, n, batch_size)]
        epoch += 1
    return steps[:total_steps]


def lr_lambda(total: int):
    return lambda s: max(0.0, 1.0 - s / max(1, total))  # linear decay, no warm-up (as the trainer)


# -- the two sides -----------------------------------------------------------------------------------
def run_raw(model_dir: Path, batches: list[dict], loss_fn, args, device: str) -> dict[str, Any]:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    dtype = torch.bfloat16 if args.bf16 else torch.float32
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=dtype)
    model.config.use_cache = False
    config = LoraConfig(
        task_type="CAUSAL_LM",
        r=LORA["r"],
        lora_alpha=LORA["alpha"],
        lora_dropout=LORA["dropout"],
        target_modules=LORA["target_modules"],
        bias="none",
    )
    torch.manual_seed(args.seed)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning)
        model = get_peft_model(model, config)
    model.to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=LR, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(len(batches)))
    autocast = torch.autocast(device_type="cuda", dtype=torch.bfloat16) if args.bf16 else nullcontext()
    torch.manual_seed(args.seed)
    times, losses = [], []
    t_call = time.perf_counter()
    model.train()
    for batch in batches:
        batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
        with autocast:
            loss = loss_fn(model, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        times.append(time.perf_counter())
    del model, opt
    return {"t_call": t_call, "times": times, "losses": losses}


def run_harness(model_dir: Path, rows: list[dict], collate, loss_fn, args, total: int) -> dict[str, Any]:
    from finetune.lora import LoraSettings, load_lora_model
    from finetune.trainer import TrainSettings, train

    model = load_lora_model(
        str(model_dir), LoraSettings(**LORA), dtype="bfloat16" if args.bf16 else "float32", seed=args.seed
    )
    settings = TrainSettings(
        seed=args.seed,
        learning_rate=LR,
        batch_size=args.batch_size,
        grad_accum=1,
        max_steps=total,
        checkpoint_every=10**9,
        log_every=10,
        mixed_precision="bf16" if args.bf16 else "no",
        resume=False,
    )
    times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="ft-bench-") as out:
        t_call = time.perf_counter()
        result = train(
            model,
            rows,
            collate,
            loss_fn,
            settings,
            out,
            progress=False,
            description="bench",
            on_step=lambda s, loss: times.append(time.perf_counter()),
        )
        t_end = time.perf_counter()
        ckpts = [p.name for p in (Path(out) / "checkpoints").glob("step-*")]
    del model
    return {
        "t_call": t_call,
        "times": times,
        "losses": result.losses,
        "t_end": t_end,
        "train_seconds": result.train_seconds,
        "checkpoints": ckpts,
    }


def step_seconds(run: dict[str, Any]) -> list[float]:
    """Duration of every step (the first from the call: it includes the setup)."""
    t = [run["t_call"], *run["times"]]
    return [round(t[i] - t[i - 1], 4) for i in range(1, len(t))]


def rates(run: dict[str, Any], warmup: int, timed: int, batch_size: int) -> dict[str, float]:
    """Samples/s over steps warmup+1 … warmup+timed (``times[i]`` is after step i+1), and over the
    same window plus the final step (the harness checkpoints after it)."""
    t = run["times"]
    a, b = t[warmup - 1], t[warmup + timed - 1]
    window = [t[i] - t[i - 1] for i in range(warmup, warmup + timed)]
    return {
        "samples_per_s": timed * batch_size / (b - a),
        "samples_per_s_median_step": batch_size / statistics.median(window),
        "samples_per_s_incl_final": (timed + 1) * batch_size / (t[-1] - a),
        "final_step_s": t[-1] - t[-2],
        "first_step_s": t[0] - run["t_call"],
    }


RESULTS = ROOT / "bench" / "results" / "finetune_throughput.json"
MODULE = "bench.finetune_throughput"


def variant_key(device: str, size: str, threads: int) -> str:
    return f"{device}-{size}" + (f"-threads{threads}" if device == "cpu" else "")


def summary(out: dict[str, Any]) -> dict[str, Any]:
    """The numbers of one run that the docs show (the committed JSON keeps these per variant)."""
    keys = (
        "machine",
        "size",
        "device",
        "precision",
        "torch_threads",
        "batch_size",
        "seq_len",
        "warmup_steps",
        "timed_steps",
        "repeats",
        "raw_samples_per_s",
        "harness_samples_per_s",
        "raw_median",
        "harness_median",
        "ratio",
        "paired_ratios",
        "ratio_median_step",
        "ratio_incl_final",
        "loss_max_abs_diff_all_steps",
        "goal",
        "goal_met",
        "losses_match",
    )
    return {"model_type": out["model"]["model_type"], **{k: out[k] for k in keys}}


def markdown(r: dict[str, Any]) -> str:
    """bench/README.md: one row per variant."""
    from bench.docs_tables import machine_line

    lines = [
        "| variant | model, precision, batch | timed steps × repeats | raw samples/s | harness samples/s "
        "| harness / raw (per repeat) | median-step ratio | losses max \\|Δ\\| | goal ≥ 0.9 |",
        "|---|---|---|---:|---:|---|---:|---:|---|",
    ]
    for key, v in r["variants"].items():
        paired = v["paired_ratios"]
        lines.append(
            f"| `{key}` | {v['model_type']} {v['size']}, {v['precision']}, {v['batch_size']} × {v['seq_len']} tokens "
            f"| {v['timed_steps']} × {v['repeats']} | {v['raw_median']:.1f} | {v['harness_median']:.1f} "
            f"| **{v['ratio']:.2f}** ({min(paired):.2f}–{max(paired):.2f}) | {v['ratio_median_step']:.2f} "
            f"| {v['loss_max_abs_diff_all_steps']:.1e} | {'met' if v['goal_met'] else 'missed'} |"
        )
    lines.append("")
    for key, v in r["variants"].items():
        lines.append(
            f"`{key}`: {machine_line(v['machine'])}, {v['device']}, torch threads: {v['torch_threads']}."
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=["small", "0.5b"], default="small")
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    ap.add_argument("--examples", type=int, default=256)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=3, help="warm-up steps excluded from the timing")
    ap.add_argument("--steps", type=int, default=30, help="timed steps")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "finetune_throughput.json")
    from bench.docs_tables import add_docs_options, finish, handle_docs_only, machine, previous

    add_docs_options(ap, MODULE)
    args = ap.parse_args()
    if handle_docs_only(args, MODULE):
        return 0
    where = machine()

    import torch

    if args.warmup < 1 or args.steps < 1:
        ap.error("--warmup and --steps must be ≥ 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        os.environ["ACCELERATE_USE_CPU"] = "true"  # accelerate must not pick a GPU either
    args.bf16 = device == "cuda"
    total = args.warmup + args.steps + 1  # + the final step, which the trainer checkpoints

    from finetune.generative import make_answer_loss, make_left_pad_collate

    t_bench = time.perf_counter()
    runs: dict[str, list[dict[str, Any]]] = {"raw": [], "harness": []}
    with tempfile.TemporaryDirectory(prefix="ft-bench-model-") as tmp:
        model_dir, info = build_model_dir(Path(tmp), args.size, args.seed)
        rows = synthetic_rows(args.examples, args.seq_len, info["vocab_size"], info["answer_ids"], args.seed)
        collate = make_left_pad_collate(info["pad_id"])
        batches = [
            collate([rows[i] for i in idx])
            for idx in data_order(len(rows), args.batch_size, total, args.seed)
        ]
        loss_fn = None
        for rep in range(args.repeats):
            # ABBA order (raw, harness, harness, raw, …): a slow drift of the machine's load hits both
            for side in ("raw", "harness") if rep % 2 == 0 else ("harness", "raw"):
                if loss_fn is None:  # one loss function object for every run of both sides
                    from transformers import AutoConfig, AutoModelForCausalLM

                    with torch.device("meta"):  # only its forward signature is read
                        sig_model = AutoModelForCausalLM.from_config(
                            AutoConfig.from_pretrained(str(model_dir))
                        )
                    loss_fn = make_answer_loss(sig_model)
                gc.collect()
                if device == "cuda":
                    torch.cuda.empty_cache()
                    torch.cuda.reset_peak_memory_stats()
                if side == "raw":
                    run = run_raw(model_dir, batches, loss_fn, args, device)
                else:
                    run = run_harness(model_dir, rows, collate, loss_fn, args, total)
                if device == "cuda":
                    run["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
                run |= rates(run, args.warmup, args.steps, args.batch_size)
                runs[side].append(run)
                print(
                    f"  repeat {rep + 1} {side:<8} {run['samples_per_s']:8.2f} samples/s "
                    f"(incl. final step {run['samples_per_s_incl_final']:.2f})",
                    flush=True,
                )

    def med(side: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[side])

    raw_sps, har_sps = med("raw", "samples_per_s"), med("harness", "samples_per_s")
    raw_mst, har_mst = med("raw", "samples_per_s_median_step"), med("harness", "samples_per_s_median_step")
    raw_fin, har_fin = med("raw", "samples_per_s_incl_final"), med("harness", "samples_per_s_incl_final")
    ratio, ratio_fin = har_sps / raw_sps, har_fin / raw_fin
    paired = [
        h["samples_per_s"] / r["samples_per_s"] for r, h in zip(runs["raw"], runs["harness"], strict=True)
    ]
    diffs = [abs(a - b) for a, b in zip(runs["raw"][0]["losses"], runs["harness"][0]["losses"], strict=True)]
    loss_diff_first = max(diffs[:LOSS_CHECK_STEPS])
    loss_tol = 2e-2 if args.bf16 else 1e-4
    losses_ok = loss_diff_first <= loss_tol
    ok = ratio >= GOAL and losses_ok
    wall = time.perf_counter() - t_bench

    out = {
        "machine": where,
        "size": args.size,
        "device": device if device == "cpu" else torch.cuda.get_device_name(),
        "precision": "bf16 weights + bf16 autocast" if args.bf16 else "fp32",
        "torch_threads": torch.get_num_threads(),
        "model": info,
        "lora": LORA,
        "examples": args.examples,
        "seq_len": args.seq_len,
        "batch_size": args.batch_size,
        "warmup_steps": args.warmup,
        "timed_steps": args.steps,
        "total_steps": total,
        "repeats": args.repeats,
        "raw_samples_per_s": [round(r["samples_per_s"], 3) for r in runs["raw"]],
        "harness_samples_per_s": [round(r["samples_per_s"], 3) for r in runs["harness"]],
        "raw_median": round(raw_sps, 3),
        "harness_median": round(har_sps, 3),
        "ratio": round(ratio, 4),
        "paired_ratios": [round(x, 4) for x in paired],
        "raw_median_step_samples_per_s": round(raw_mst, 3),
        "harness_median_step_samples_per_s": round(har_mst, 3),
        "ratio_median_step": round(har_mst / raw_mst, 4),
        "step_seconds": {s: [step_seconds(r) for r in runs[s]] for s in runs},
        "raw_median_incl_final": round(raw_fin, 3),
        "harness_median_incl_final": round(har_fin, 3),
        "ratio_incl_final": round(ratio_fin, 4),
        "final_step_s": {
            "raw": round(med("raw", "final_step_s"), 4),
            "harness": round(med("harness", "final_step_s"), 4),
        },
        "first_step_s": {
            "raw": round(med("raw", "first_step_s"), 4),
            "harness": round(med("harness", "first_step_s"), 4),
        },
        "harness_checkpoints_written": runs["harness"][0]["checkpoints"],
        "loss_max_abs_diff_first_5": loss_diff_first,
        "loss_max_abs_diff_all_steps": max(diffs),
        "loss_tolerance": loss_tol,
        "first_losses": {
            "raw": runs["raw"][0]["losses"][:LOSS_CHECK_STEPS],
            "harness": runs["harness"][0]["losses"][:LOSS_CHECK_STEPS],
        },
        "goal": GOAL,
        "goal_met": ratio >= GOAL,
        "losses_match": losses_ok,
        "bench_wall_s": round(wall, 1),
    }
    if device == "cuda":
        out["peak_gpu_mb"] = {s: round(med(s, "peak_gpu_mb"), 1) for s in runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")

    print(
        f"\n{info['model_type']} {args.size}, {device}, {out['precision']}, batch {args.batch_size} × "
        f"{args.seq_len} tokens, {args.steps} timed steps after {args.warmup} warm-up, "
        f"{args.repeats} repeats interleaved\n"
    )
    print(f"| {'':<32} | {'raw':>9} | {'harness':>9} | {'harness/raw':>11} |")
    print(f"|{'-' * 34}|{'-' * 11}|{'-' * 11}|{'-' * 13}|")
    print(f"| {'samples/s (median)':<32} | {raw_sps:9.2f} | {har_sps:9.2f} | {ratio:11.3f} |")
    print(
        f"| {'samples/s from median step time':<32} | {raw_mst:9.2f} | {har_mst:9.2f} | {har_mst / raw_mst:11.3f} |"
    )
    print(f"| {'samples/s incl. final step':<32} | {raw_fin:9.2f} | {har_fin:9.2f} | {ratio_fin:11.3f} |")
    print(
        f"| {'final step (s; harness: + ckpt)':<32} | {out['final_step_s']['raw']:9.3f} | "
        f"{out['final_step_s']['harness']:9.3f} | {'':>11} |"
    )
    print(
        f"| {'call → first step done (s)':<32} | {out['first_step_s']['raw']:9.3f} | "
        f"{out['first_step_s']['harness']:9.3f} | {'':>11} |"
    )
    print(f"\nper-repeat harness/raw: {', '.join(f'{x:.3f}' for x in paired)}")
    print(
        f"loss max |Δ| first {LOSS_CHECK_STEPS} steps: {loss_diff_first:.2e} (all steps {max(diffs):.2e}; "
        f"tolerance {loss_tol:g}): {'OK' if losses_ok else 'MISMATCH'}"
    )
    print(f"harness / raw = {ratio:.3f} vs goal ≥ {GOAL}: {'OK' if ratio >= GOAL else 'MISSED'}")
    print(f"benchmark wall time {wall:.1f} s; wrote {args.out}")
    committed = previous(args, MODULE, {"variants": {}})
    committed["variants"][variant_key(device, args.size, out["torch_threads"])] = summary(out)
    finish(args, MODULE, committed)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
