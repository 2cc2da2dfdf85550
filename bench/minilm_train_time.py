"""CPU wall time to train the MiniLM evaluator on 10k self-supervised pairs (goal ≤ 10 min on the
project's 2-core machine): the shipped job (finetune/configs/minilm-topicalchat.yaml, Topical-Chat
from ../shared) into a temporary directory, timed end to end (data → registered version → training
→ saved adapter → card).

    .venv/bin/python bench/minilm_train_time.py            # ~10 min
    .venv/bin/python bench/minilm_train_time.py --pairs 2000

Writes the run into bench/results/minilm_train_time.json (committed; one entry per ``--pairs``) and,
with ``--write-docs``, the table of bench/README.md rendered from it (``--docs-only`` rewrites it from
the committed JSON); exits 1 when the goal is missed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GOAL_S = 600.0
RESULTS = ROOT / "bench" / "results" / "minilm_train_time.json"
MODULE = "bench.minilm_train_time"


def markdown(r: dict) -> str:
    """bench/README.md: one row per pair count."""
    from bench.docs_tables import machine_line

    lines = [
        "| pairs | steps | training (s) | end to end (s) | goal (s) | ratio | pairs/s | held-out accuracy | held-out AUC |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in r["runs"].values():
        h = run["held_out"]
        acc, auc = h.get("accuracy"), h.get("auc")
        lines.append(
            f"| {run['pairs']:,} | {run['steps']} | {run['train_s']:.0f} | **{run['wall_s']:.1f}** | {run['goal_s']:.0f} "
            f"| {run['ratio_to_goal']:.2f} | {run['pairs_per_s']:.1f} | {'' if acc is None else f'{acc:.3f}'} "
            f"| {'' if auc is None else f'{auc:.3f}'} |"
        )
    lines.append("")
    lines += [
        f"`--pairs {k}`: {machine_line(run['machine'])}, `{run['config']}`." for k, run in r["runs"].items()
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--pairs", type=int, default=10_000, help="training pairs (90%% turn, 10%% dialogue level)"
    )
    ap.add_argument("--config", default=str(ROOT / "finetune" / "configs" / "minilm-topicalchat.yaml"))
    from bench.docs_tables import add_docs_options, finish, handle_docs_only, machine, previous

    add_docs_options(ap, MODULE)
    args = ap.parse_args()
    if handle_docs_only(args, MODULE):
        return 0
    where = machine()
    from finetune.recipe import EvaluatorJob, run_evaluator_job

    job = EvaluatorJob.load(args.config)
    with tempfile.TemporaryDirectory() as tmp:
        job.output, job.card, job.registry = str(Path(tmp) / "eval"), None, str(Path(tmp) / "registry")
        job.data.turn_pairs, job.data.dialogue_pairs = round(args.pairs * 0.9), round(args.pairs * 0.1)
        t0 = time.perf_counter()
        out = run_evaluator_job(job, progress=False)
        wall = time.perf_counter() - t0
    tr = out["train"]["train"]
    res = {
        "machine": where,
        "config": os.path.relpath(Path(args.config).resolve(), ROOT),
        "pairs": out["data"]["examples"],
        "steps": tr["steps"],
        "wall_s": round(wall, 1),
        "train_s": tr["train_seconds"],
        "pairs_per_s": round(out["data"]["examples"] / tr["train_seconds"], 2),
        "goal_s": GOAL_S if args.pairs == 10_000 else round(GOAL_S * args.pairs / 10_000, 1),
        "held_out": {
            k: v for k, v in (out["train"].get("eval") or {}).items() if not isinstance(v, (dict, list))
        },
    }
    res["ratio_to_goal"] = round(wall / res["goal_s"], 3)
    for k, v in res.items():
        print(f"{k:<14} {v}")
    committed = previous(args, MODULE, {"runs": {}})
    committed["runs"][str(args.pairs)] = res
    finish(args, MODULE, committed)
    ok = wall <= res["goal_s"]
    print(f"\nwall {wall:.0f} s vs goal {res['goal_s']:.0f} s: {'OK' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
