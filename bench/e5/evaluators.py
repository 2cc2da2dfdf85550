"""The E5 LoRA evaluators (issue 23): the hyper-parameter search on validation pairs carved from the
training material, and the shipped evaluators' training records, as one generated docs table.

    .venv/bin/python bench/e5/evaluators.py [--sweep] [--write-docs] [--docs-only] [--results PATH]

* ``--sweep`` trains every configuration of :data:`SWEEP` briefly (``steps`` optimizer steps on the
  first ``steps × batch size`` training pairs of the job, built with the variant's data settings) and
  scores one fixed validation set per level: the pairs of the *base* job's held-out dialogues
  (``data.eval_fraction`` of the Chit-Chat Challenge + Topical-Chat dialogues; never an xDial-Eval
  text, never a human rating). Reported: validation AUC and accuracy, wall time. The shipped
  configuration is the one with the best validation AUC per level.
* Without ``--sweep`` the sweep results already in ``--results`` are kept (a rerun of the records only).
* Always: the shipped evaluators' own records (``finetune/evaluators/<name>/dialeval_evaluator.json``,
  written by ``harness finetune evaluator --config finetune/configs/<name>.yaml``): training pairs,
  steps, cached sequences, cold training wall time, validation metrics on the job's held-out pairs.

The xDial-Eval scores of the shipped evaluators are in the multilingual table
(``bench/multilingual_table.py``). Writes bench/results/e5_evaluators.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "e5_evaluators.json"
MODULE = "bench.e5.evaluators"
CONFIGS = ROOT / "finetune" / "configs"
SHIPPED = {"turn": "e5-poe-turn", "dialogue": "e5-fined-dial"}

#: level -> (steps, validation pairs kept, [(variant name, data overrides, discriminative overrides)])
SWEEP: dict[str, tuple[int, int, list[tuple[str, dict[str, Any], dict[str, Any]]]]] = {
    "turn": (
        150,
        800,
        [
            ("shipped: LoRA r16 top 4 layers, lr 1e-3, 25% hard negatives, 3 context turns", {}, {}),
            ("lr 3e-4", {}, {"train": {"learning_rate": 3e-4}}),
            ("random negatives only", {"hard_negative_ratio": 0.0}, {}),
            ("LoRA on the top 2 layers only (frozen 10)", {}, {"frozen_layers": 10}),
            ("1 context turn", {}, {"context_turns": 1}),
        ],
    ),
    "dialogue": (
        100,
        400,
        [
            ("shipped: LoRA r16 top 4 layers, lr 1e-3, 256 tokens", {}, {}),
            ("lr 3e-4", {}, {"train": {"learning_rate": 3e-4}}),
        ],
    ),
}


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def sweep_level(level: str, progress: bool) -> list[dict[str, Any]]:
    from finetune.discriminative import DiscriminativeConfig, train_discriminative
    from finetune.recipe import EvaluatorJob, build_examples

    steps, n_val, variants = SWEEP[level]
    base = EvaluatorJob.load(CONFIGS / f"{SHIPPED[level]}.yaml")
    _, held, _ = build_examples(base)
    held = held[:n_val]
    rows = []
    for name, data_over, disc_over in variants:
        job = base.model_copy(deep=True)
        if data_over:
            job.data = job.data.model_copy(update=data_over)
        train, _, _ = build_examples(job) if data_over else build_examples(base)
        disc = _merge(base.discriminative.model_dump(mode="json"), disc_over)
        disc["train"] = {**disc["train"], "max_steps": steps, "checkpoint_every": 10**6, "resume": False}
        cfg = DiscriminativeConfig.model_validate(disc)
        subset = train[: steps * cfg.train.batch_size]
        print(f"[{level}] {name}: {len(subset)} pairs, {steps} steps", file=sys.stderr, flush=True)
        t = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="e5-sweep-") as out:
            summary = train_discriminative(subset, cfg, out, eval_examples=held, progress=progress)
        ev = summary["eval"]
        rows.append(
            {
                "level": level,
                "variant": name,
                "data_overrides": data_over,
                "overrides": disc_over,
                "train_pairs": len(subset),
                "steps": steps,
                "validation_pairs": ev["n"],
                "validation_auc": ev["auc"],
                "validation_accuracy": ev["accuracy"],
                "wall_s": round(time.perf_counter() - t, 1),
            }
        )
        print(f"    AUC {ev['auc']:.4f} acc {ev['accuracy']:.4f}", file=sys.stderr, flush=True)
    return rows


def shipped_records() -> list[dict[str, Any]]:
    from finetune.evaluator_judge import PACKAGED_DIR

    out = []
    for level, name in SHIPPED.items():
        meta_path = PACKAGED_DIR / name / "dialeval_evaluator.json"
        if not meta_path.is_file():
            continue
        meta = json.loads(meta_path.read_text("utf-8"))
        tr, dv = meta["train_result"], meta.get("data_version") or {}
        out.append(
            {
                "level": level,
                "evaluator": name,
                "base_model": meta["base_model"],
                "data": {k: dv.get(k) for k in ("name", "version", "examples", "positives", "kinds")},
                "trainable_parameters": meta["trainable_parameters"],
                "frozen_layers": meta["frozen_layers"],
                "cached_sequences": meta["cached_sequences"],
                "steps": tr["steps"],
                "train_wall_s": tr["wall_seconds"],
                "validation": meta.get("eval"),
                "prepare_s": (meta.get("timings") or {}).get("prepare_s"),
            }
        )
    return out


def _f(v: Any, fmt: str = ".3f") -> str:
    return "—" if v is None else format(v, fmt)


def markdown(res: dict[str, Any]) -> str:
    from bench.docs_tables import machine_line

    lines = [
        "**Hyper-parameter search** (validation pairs from held-out Chit-Chat Challenge + Topical-Chat "
        f"dialogues; short runs; {machine_line(res['sweep_machine'])})"
        if res.get("sweep_machine")
        else "",
        "",
        "| level | configuration | train pairs | steps | validation AUC | accuracy | wall |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in res.get("sweep", []):
        lines.append(
            f"| {r['level']} | {r['variant']} | {r['train_pairs']} | {r['steps']} | "
            f"{_f(r['validation_auc'], '.4f')} | {_f(r['validation_accuracy'])} | {r['wall_s']:.0f} s |"
        )
    lines += [
        "",
        f"**Shipped evaluators: cold CPU training** ({machine_line(res['machine'])} when recorded)",
        "",
        "| evaluator | level | training pairs | steps | trainable params | cached frozen sequences | "
        "training wall | validation AUC | accuracy |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in res.get("shipped", []):
        v = r.get("validation") or {}
        lines.append(
            f"| `evaluator:{r['evaluator']}` | {r['level']} | {r['data']['examples']} | {r['steps']} | "
            f"{r['trainable_parameters']:,} | {r['cached_sequences']:,} | {r['train_wall_s'] / 60:.1f} min | "
            f"{_f(v.get('auc'), '.4f')} | {_f(v.get('accuracy'))} |"
        )
    return "\n".join(lines).lstrip("\n") + "\n"


def main() -> int:
    from bench.docs_tables import add_docs_options, finish, handle_docs_only, machine, previous

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sweep", action="store_true", help="rerun the hyper-parameter search (~25 min CPU)")
    ap.add_argument("--levels", default="turn,dialogue")
    ap.add_argument("--progress", action="store_true")
    add_docs_options(ap, MODULE)
    args = ap.parse_args()
    if handle_docs_only(args, MODULE):
        return 0
    res = previous(args, MODULE, {"sweep": []})
    res["machine"] = machine()
    if args.sweep:
        res["sweep_machine"] = machine()
        rows = []
        for level in args.levels.split(","):
            rows += sweep_level(level, args.progress)
        kept = [r for r in res.get("sweep", []) if r["level"] not in args.levels.split(",")]
        res["sweep"] = kept + rows
    res["shipped"] = shipped_records()
    print(markdown(res))
    finish(args, MODULE, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
