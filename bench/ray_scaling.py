"""1 vs 2 Ray workers on this machine, side by side in one run, and Ray's per-item overhead.

* **Scaling**: ``harness run`` (the real runner: prompts, cache off, P(Yes) parsing) with a
  CPU-bound tiny hf judge — the test fixtures' random Qwen2 (hidden 128, 2 layers, byte-level BPE,
  ChatML) — on xDial-Eval turn-level items (``../shared/data/xdial-eval``; the embedded demo set
  when it is missing), on ``--executor ray --workers 1`` and ``--workers 2`` (one CPU and one torch
  thread per worker), interleaved ``--repeats`` times. Items/s are the runner's scoring rate (weights
  loading excluded). Goal: ray × 2 ≥ 1.6 × ray × 1, with results identical to ``--executor local``.
* **Overhead**: the replay backend (no model: every millisecond is executor overhead) through the
  pool backend vs the same backend in-process, ``--replay-n`` requests in runner-sized calls
  (``batch × workers``). Goal: ≤ 2 ms per item.

    .venv/bin/python bench/ray_scaling.py                      # ~2 min on 2 cores
    .venv/bin/python bench/ray_scaling.py --limit 10 --repeats 1   # quick look

Run it when the machine is otherwise idle (``uptime``): both workers need a core each.

Each run is appended to bench/results/ray_scaling.json (committed; the last ``KEEP`` runs, each
with its configuration and the load average at its start, since the scaling ratio depends on a
free second core) and, with ``--write-docs``, the runs table of bench/README.md is rendered from it
(``--docs-only`` rewrites the table from the committed JSON).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
XDIAL = ROOT.parent / "shared" / "data" / "xdial-eval"
RESULTS = ROOT / "bench" / "results" / "ray_scaling.json"
MODULE = "bench.ray_scaling"
KEEP = 6  # runs kept in RESULTS
GOAL_RATIO, GOAL_OVERHEAD_MS = 1.6, 2.0


def markdown(r: dict) -> str:
    """bench/README.md: one row per kept run, oldest first."""
    lines = [
        "| date | run | load avg | items | local it/s | ray × 1 it/s | ray × 2 it/s | ratio × 2 / × 1 "
        "| identical | replay overhead ms/item (× 1, × 2) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for run in r["runs"]:
        m, med = run["machine"], run["median_items_per_s"]
        met = "met" if run["ratio"] >= GOAL_RATIO else "missed"
        over = ", ".join(f"{run['replay_overhead'][w]['overhead_ms']:.3f}" for w in ("1", "2"))
        lines.append(
            f"| {m['date']} | `{run['args']}` | {m['load_avg_start']:.2f} | {run['items']} "
            f"| {run['local_items_per_s']:.1f} | {med['1']:.1f} | {med['2']:.1f} | **{run['ratio']:.2f}** ({met}) "
            f"| {'yes' if run['identical'] else 'NO'} (max \\|Δ\\| {run['max_abs_diff']:.1g}) | {over} |"
        )
    return "\n".join(lines)


def _run(judge: str, args, out: Path, workers: int | None):
    from harness.executors import ExecutorConfig
    from harness.run.runner import RunConfig, run

    ex = ExecutorConfig("ray", workers=workers) if workers else ExecutorConfig()
    source = str(args.source) if args.source else None
    return run(
        RunConfig(
            judge=judge,
            tasks=[args.task],
            languages=args.languages,
            limit=args.limit,
            batch_size=args.batch_size,
            use_cache=False,
            show_progress=False,
            n_bootstrap=0,
            output_dir=out,
            source=source,
            executor=ex,
        )
    )


def _same(a, b) -> tuple[bool, float]:
    cols = ["id", "score", "raw_output", "parse_status"]
    x, y = a.samples[cols].to_dict("records"), b.samples[cols].to_dict("records")
    d = max(
        (
            abs(p["score"] - q["score"])
            for p, q in zip(x, y, strict=True)
            if p["score"] is not None and q["score"] is not None
        ),
        default=0.0,
    )
    return x == y, d


def replay_overhead(n: int, batch: int, workers: int, work: Path) -> dict[str, float]:
    """Seconds per request through the Ray pool minus in-process, for the replay backend."""
    from harness.backends.base import create_backend, create_local_backend
    from harness.executors import ExecutorConfig, executor_scope
    from harness.spec import parse_spec
    from harness.types import ChatMessage, GenerationConfig, Request

    rules = work / "replay.jsonl"
    rules.write_text('{"default": {"hashed_p_yes": true}}\n', encoding="utf-8")
    spec = parse_spec(f"replay:{rules}")
    cfg = GenerationConfig(max_tokens=1)
    reqs = [
        Request(
            messages=(ChatMessage("user", f"Dialogue {i}: is the response relevant? Answer Yes or No."),),
            config=cfg,
            choices=("Yes", "No"),
        )
        for i in range(n)
    ]
    step = batch * workers

    def timed(backend) -> float:
        t0 = time.perf_counter()
        for s in range(0, n, step):
            backend.generate(reqs[s : s + step])
        return time.perf_counter() - t0

    local = create_local_backend(spec)
    timed(local)  # warm
    t_local = min(timed(local) for _ in range(3))
    with executor_scope(ExecutorConfig("ray", workers=workers, shard_size=batch)):
        pooled = create_backend(spec)
        timed(pooled)  # warm (first shard on each worker)
        t_ray = min(timed(pooled) for _ in range(3))
        pooled.close()
    return {
        "local_ms": 1e3 * t_local / n,
        "ray_ms": 1e3 * t_ray / n,
        "overhead_ms": 1e3 * (t_ray - t_local) / n,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--task", default=None, help="default: xdial-eval-turn (demo-turn without ../shared/data)"
    )
    ap.add_argument("--languages", default="en,de,zh,es")
    ap.add_argument("--limit", type=int, default=25, help="items per dataset and language")
    ap.add_argument("--batch-size", type=int, default=8, help="items per worker shard (= hf batch)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--replay-n", type=int, default=4096)
    ap.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    sys.path.insert(0, str(ROOT))
    from bench.docs_tables import add_docs_options, finish, handle_docs_only, machine, previous, run_args

    add_docs_options(ap, MODULE)
    shown_args = run_args()
    args = ap.parse_args()
    if handle_docs_only(args, MODULE):
        return
    args.languages = args.languages.split(",")
    if args.task is None:
        args.task, args.source = ("xdial-eval-turn", XDIAL) if XDIAL.is_dir() else ("demo-turn", None)
    else:
        args.source = XDIAL if args.task.startswith("xdial") else None

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import ray
    import torch

    torch.set_num_threads(1)  # the local reference run: one thread, like each worker
    from tests.fixtures.tiny_models import build_tiny_causal_lm

    where = machine()
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = build_tiny_causal_lm(work / "model", "qwen2")
        judge = f"hf:{model},batch_size={args.batch_size}"
        local = _run(judge, args, work / "local", None)
        rates: dict[int, list[float]] = {1: [], 2: []}
        outs = {}
        for _ in range(args.repeats):
            for w in (1, 2):
                o = _run(judge, args, work / f"ray{w}", w)
                rates[w].append(o.results["timings"]["items_per_s_scoring"])
                outs[w] = o
        over = {w: replay_overhead(args.replay_n, 32, w, work) for w in (1, 2)}
    ray.shutdown()

    n = len(local.samples)
    med = {w: statistics.median(r) for w, r in rates.items()}
    ratio = med[2] / med[1]
    same1, d1 = _same(local, outs[1])
    same2, d2 = _same(local, outs[2])
    local_rate = local.results["timings"]["items_per_s_scoring"]
    print(
        f"\nRay scaling on {os.cpu_count()} cores (load average {load:.2f} at start), ray {ray.__version__}"
    )
    print(
        f"{args.task}: {n} items ({','.join(args.languages)}, limit {args.limit}), tiny random Qwen2 hf judge, "
        f"batch {args.batch_size}, 1 CPU + 1 torch thread per worker, cache off, {args.repeats} interleaved repeats"
    )
    print(f"{'config':<10} {'items/s per repeat':<28} {'median':>8}")
    print(f"{'local':<10} {f'{local_rate:.1f}':<28} {local_rate:>8.1f}")
    for w in (1, 2):
        print(f"{f'ray × {w}':<10} {', '.join(f'{r:.1f}' for r in rates[w]):<28} {med[w]:>8.1f}")
    print(f"ratio ray × 2 / ray × 1: {ratio:.2f}× (goal ≥ 1.6: {'met' if ratio >= 1.6 else 'MISSED'})")
    print(
        f"identical to local: ray × 1 {'yes' if same1 else 'NO'}, ray × 2 {'yes' if same2 else 'NO'} "
        f"(ids, scores, raw outputs, statuses of {n} items; max |Δscore| {max(d1, d2):.1e})"
    )
    print(f"replay backend, {args.replay_n} requests in calls of 32 × workers:")
    for w, o in over.items():
        print(
            f"  ray × {w}: {o['ray_ms']:.3f} ms/item vs in-process {o['local_ms']:.3f} → overhead "
            f"{o['overhead_ms']:.3f} ms/item (goal ≤ 2: {'met' if o['overhead_ms'] <= 2 else 'MISSED'})"
        )
    run_record = {
        "machine": where,
        "args": shown_args,
        "task": args.task,
        "languages": args.languages,
        "limit": args.limit,
        "repeats": args.repeats,
        "items": n,
        "ray": ray.__version__,
        "local_items_per_s": round(local_rate, 2),
        "items_per_s": {str(w): [round(x, 2) for x in r] for w, r in rates.items()},
        "median_items_per_s": {str(w): round(m, 2) for w, m in med.items()},
        "ratio": round(ratio, 3),
        "identical": same1 and same2,
        "max_abs_diff": max(d1, d2),
        "replay_overhead": {str(w): {k: round(v, 4) for k, v in o.items()} for w, o in over.items()},
    }
    committed = previous(args, MODULE, {"runs": []})
    committed["runs"] = [*committed["runs"], run_record][-KEEP:]
    finish(args, MODULE, committed)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "task": args.task,
                    "items": n,
                    "load_avg_start": load,
                    "local_items_per_s": local_rate,
                    "items_per_s": {str(w): r for w, r in rates.items()},
                    "ratio": ratio,
                    "identical": same1 and same2,
                    "replay_overhead": {str(w): o for w, o in over.items()},
                },
                indent=2,
            ),
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
