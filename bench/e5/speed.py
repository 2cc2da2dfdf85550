"""Speed of the E5 LoRA evaluators, each against its raw counterpart in one run.

    .venv/bin/python bench/e5/speed.py [--config finetune/configs/e5-poe-turn.yaml] [--steps 30]
                                       [--evaluator finetune/evaluators/e5-poe-turn] [--limit 40]

* **Training**: steps/s of :func:`finetune.discriminative.train_discriminative`'s loop
  (:func:`finetune.trainer.train`: accelerate, DataLoader + collate per step, logging, checkpoints)
  against a raw PEFT + torch loop on the same model (built by the same code from the job's
  ``discriminative:`` settings: LoRA on the top layers, the frozen layers' outputs cached) and the
  same batches in the same order (the trainer's own data order, pre-collated for the raw loop):
  ``loss.backward(); clip_grad_norm_; opt.step(); sched.step(); opt.zero_grad()``. Real training
  pairs (the job's data, first ``--examples``). The two sides run twice, interleaved ABBA; medians of
  the per-step times after ``--warmup`` steps are compared. Goal: harness / raw ≥ 0.9.
* **Scoring**: items/s of ``harness run --judge evaluator:<dir>`` on xDial-Eval turn-level items
  (``--limit`` per set and language, all 10 languages; the scoring phase of a cold-cache run, from
  its results.json timings, model loading excluded) against raw forward passes of the loaded
  evaluator over the same items in the same batches (tokenize + collate + forward), each side in a
  fresh process without warm-up. Goal: harness / raw ≥ 0.9.

Writes bench/results/e5_speed.json (``--results``) with the machine (CPU, load average at the start);
``--write-docs`` renders its table into bench/README.md. Exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
DEFAULT_SOURCE = ROOT.parent / "shared" / "data" / "xdial-eval"
RESULTS = ROOT / "bench" / "results" / "e5_speed.json"
MODULE = "bench.e5.speed"


# -- training ------------------------------------------------------------------------------------
def training_batches(config: Path, n_examples: int, steps: int):
    """(cfg, model factory, feats, collate, lengths, order of indices per step) of the job's data."""
    from finetune.data.order import epoch_permutation
    from finetune.discriminative import _encode_examples
    from finetune.encoder.model import InputEncoder, build_model
    from finetune.recipe import EvaluatorJob, build_examples

    job = EvaluatorJob.load(config)
    train, _, _ = build_examples(job)
    cfg = job.discriminative.model_copy(deep=True)
    cfg.train.max_steps = steps
    cfg.train.checkpoint_every = 10**9
    cfg.train.resume = False
    _, tok = build_model(cfg)
    coder = InputEncoder(tok, cfg.max_length, cfg.truncation_side, cfg.pair_mode, cfg.context_turns)
    feats, _ = _encode_examples(coder, train[:n_examples], "training")
    lengths = [coder.length(f) for f in feats]
    bs = cfg.train.batch_size
    order = epoch_permutation(len(feats), cfg.train.seed, 0, cfg.train.shuffle, lengths, bs)
    batches = [order[s : s + bs] for s in range(0, len(order), bs)][:steps]
    return cfg, coder, feats, lengths, batches


def _fresh_model(cfg: Any, coder: Any, feats: list[dict]) -> tuple[Any, list[dict]]:
    """A new model (same seed) and its copy of the features (frozen layers' outputs cached, as the
    training job does; the token-id features given stay untouched)."""
    from finetune.discriminative import _cache_frozen
    from finetune.encoder.model import build_model

    model, _ = build_model(cfg)
    mine = [dict(f) for f in feats]
    if cfg.frozen_layers and cfg.cache_frozen:
        _cache_frozen(model, mine, cfg.frozen_layers, coder.pad_id, False)
    return model, mine


def run_raw(cfg: Any, coder: Any, feats: list[dict], batches: list[list[int]]) -> list[float]:
    import torch

    from finetune.discriminative import _bce_loss

    model, mine = _fresh_model(cfg, coder, feats)
    collated = [coder.collate([mine[i] for i in b]) for b in batches]
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.train.learning_rate, weight_decay=cfg.train.weight_decay)
    total = len(collated)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1.0 - s / max(1, total)))
    model.train()
    times = [time.perf_counter()]
    for batch in collated:
        loss = _bce_loss(model, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.train.max_grad_norm)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
        times.append(time.perf_counter())
    return [times[i] - times[i - 1] for i in range(1, len(times))]


def run_harness(cfg: Any, coder: Any, feats: list[dict], lengths: list[int], steps: int) -> list[float]:
    from finetune.discriminative import _bce_loss
    from finetune.trainer import train

    model, mine = _fresh_model(cfg, coder, feats)
    times = [time.perf_counter()]
    with tempfile.TemporaryDirectory(prefix="e5-speed-") as out:
        train(
            model,
            mine,
            coder.collate,
            _bce_loss,
            cfg.train,
            out,
            progress=False,
            description="bench",
            on_step=lambda s, loss: times.append(time.perf_counter()),
            lengths=lengths,
        )
    return [times[i] - times[i - 1] for i in range(1, len(times))][:steps]


def bench_training(args: argparse.Namespace) -> dict[str, Any]:
    cfg, coder, feats, lengths, batches = training_batches(args.config, args.examples, args.steps)
    print(f"[train] {len(feats)} examples, {len(batches)} steps × {cfg.train.batch_size}", flush=True)
    runs: dict[str, list[list[float]]] = {"raw": [], "harness": []}
    for side in ("raw", "harness", "harness", "raw"):
        t = (
            run_raw(cfg, coder, feats, batches)
            if side == "raw"
            else run_harness(cfg, coder, feats, lengths, len(batches))
        )
        runs[side].append(t)
        print(f"[train] {side}: median step {statistics.median(t[args.warmup :]):.3f} s", flush=True)

    def med(side: str) -> float:
        return statistics.median(s for r in runs[side] for s in r[args.warmup :])

    raw, harness = med("raw"), med("harness")
    return {
        "config": str(args.config.relative_to(ROOT) if args.config.is_relative_to(ROOT) else args.config),
        "examples": len(feats),
        "steps": len(batches),
        "batch_size": cfg.train.batch_size,
        "frozen_layers": cfg.frozen_layers,
        "cache_frozen": cfg.cache_frozen,
        "warmup_steps": args.warmup,
        "raw_median_step_s": raw,
        "harness_median_step_s": harness,
        "raw_steps_per_s": 1 / raw,
        "harness_steps_per_s": 1 / harness,
        "ratio_harness_vs_raw": raw / harness,
    }


# -- scoring -------------------------------------------------------------------------------------
def _turn_items(source: Path, limit: int) -> list[dict]:
    from harness.data.resolve import load_items, prepare_dataset
    from harness.tasks import get_task

    spec = get_task("xdial-eval-turn")
    handle = prepare_dataset("xdial-eval", source=source, show_progress=False)
    return [
        it
        for config in spec.configs
        if config in handle.configs
        for it in load_items(handle, config, languages=list(spec.languages), limit=limit)
    ]


def raw_scoring(evaluator: Path, source: Path, limit: int, batch_size: int) -> dict[str, Any]:
    """Raw forward passes of the loaded evaluator over the items, in the harness's batches of
    ``batch_size`` (run in a fresh process, like ``harness run``; model loading not timed)."""
    import torch

    from finetune.discriminative import DiscriminativeEvaluator

    items = _turn_items(source, limit)
    ev = DiscriminativeEvaluator.load(evaluator, device="cpu")
    t = time.perf_counter()
    with torch.no_grad():
        for s in range(0, len(items), batch_size):
            ev.logits(items[s : s + batch_size], batch_size=ev.batch_size)
    return {"items": len(items), "seconds": time.perf_counter() - t}


def bench_scoring(args: argparse.Namespace) -> dict[str, Any]:
    """Both sides in a fresh process each (cold, no warm-up), model loading excluded on both."""
    n_items = len(_turn_items(args.source, args.limit))
    print(f"[score] {n_items} turn-level items", flush=True)
    bs = args.batch_size
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = (
        "import json, sys; from pathlib import Path; from bench.e5.speed import raw_scoring; "
        "print(json.dumps(raw_scoring(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(args.evaluator), str(args.source), str(args.limit), str(bs)],
        check=True,
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout
    raw = json.loads(out.strip().splitlines()[-1])
    raw_s = raw["seconds"]
    with tempfile.TemporaryDirectory(prefix="e5-speed-run-") as work:
        out = Path(work) / "run"
        cmd = [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--task",
            "xdial-eval-turn",
            "--source",
            str(args.source),
            "--limit",
            str(args.limit),
            "--batch-size",
            str(bs),
            "--cache",
            str(Path(work) / "cache.sqlite"),
            "--output",
            str(out),
            "--quiet",
            "--judge",
            f"evaluator:{args.evaluator},device=cpu",
        ]
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, cwd=ROOT)
        res = json.loads((out / "results.json").read_text("utf-8"))
    n = res["run"]["n_items"]
    scoring = res["timings"]["scoring_s"]
    return {
        "evaluator": str(
            args.evaluator.relative_to(ROOT) if args.evaluator.is_relative_to(ROOT) else args.evaluator
        ),
        "items": n,
        "limit_per_set_and_language": args.limit,
        "batch_size": bs,
        "raw_seconds": raw_s,
        "raw_items_per_s": raw["items"] / raw_s,
        "harness_scoring_s": scoring,
        "harness_items_per_s": n / scoring,
        "ratio_harness_vs_raw": (n / scoring) / (raw["items"] / raw_s),
    }


def markdown(r: dict[str, Any]) -> str:
    from bench.docs_tables import machine_line

    lines = [
        f"{machine_line(r['machine'])}, torch threads {r['threads']}.",
        "",
        "| path | raw | harness | harness / raw (goal ≥ 0.9) |",
        "|---|---:|---:|---:|",
    ]
    if "training" in r:
        t = r["training"]
        lines.append(
            f"| training, `{Path(t['config']).name}` ({t['steps']} steps × {t['batch_size']}, "
            f"frozen {t['frozen_layers']} layers cached): steps/s | {t['raw_steps_per_s']:.3f} | "
            f"{t['harness_steps_per_s']:.3f} | **{t['ratio_harness_vs_raw']:.2f}** |"
        )
    if "scoring" in r:
        c = r["scoring"]
        lines.append(
            f"| scoring, `evaluator:{Path(c['evaluator']).name}` on {c['items']} xDial-Eval turn items "
            f"(batch {c['batch_size']}): items/s | {c['raw_items_per_s']:.1f} | {c['harness_items_per_s']:.1f} | "
            f"**{c['ratio_harness_vs_raw']:.2f}** |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", type=Path, default=ROOT / "finetune" / "configs" / "e5-poe-turn.yaml")
    ap.add_argument("--examples", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--evaluator", type=Path, default=ROOT / "finetune" / "evaluators" / "e5-poe-turn")
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--limit", type=int, default=20, help="items per set and language (scoring)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--skip", choices=["train", "score"], help="leave one part out")
    from bench.docs_tables import add_docs_options, finish, handle_docs_only, machine

    add_docs_options(ap, MODULE)
    a = ap.parse_args()
    if handle_docs_only(a, MODULE):
        return 0
    import torch

    record: dict[str, Any] = {"machine": machine(), "threads": torch.get_num_threads()}
    if a.skip != "train":
        record["training"] = bench_training(a)
    if a.skip != "score":
        if not a.source.is_dir():
            sys.exit(f"xDial-Eval source {a.source} not found (pass --source ../shared/data/xdial-eval)")
        record["scoring"] = bench_scoring(a)
    finish(a, MODULE, record)
    ok = True
    for part in ("training", "scoring"):
        if part in record:
            r = record[part]["ratio_harness_vs_raw"]
            print(f"{part}: harness / raw = {r:.3f} (goal >= 0.9)")
            ok &= r >= 0.9
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
