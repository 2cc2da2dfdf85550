"""The E5 LoRA evaluators: the hyper-parameter search on validation pairs carved from the
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

* ``--xdial``: the shipped evaluators on the shared xDial-Eval sets (full size, 10 languages):
  ``harness run --judge evaluator:e5-poe-turn --task xdial-eval-turn`` and
  ``evaluator:e5-fined-dial`` on ``xdial-eval-dialogue``, into ``--out`` (an existing
  ``results.json`` there is read, not recomputed); per-language Pearson / Spearman with 95% CIs and
  per-set values, next to the paper's PoE / FineD-Eval rows.

Writes bench/results/e5_evaluators.json.
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
#: cold end-to-end wall time of each shipped evaluator's `harness finetune evaluator --config ...` run
#: (data build, model materialised already, tokenisation, frozen-layer cache, training, held-out scoring,
#: card), measured on the shared 2-core machine while other jobs ran (load average 7-13)
END_TO_END = {
    "e5-poe-turn": (
        2781,
        "process start 20:44:37 to card written 21:30:58, the run's log and metadata file times",
    ),
    "e5-fined-dial": (
        753,
        "`/usr/bin/time -v harness finetune evaluator --config finetune/configs/e5-fined-dial.yaml`",
    ),
}
DEFAULT_SOURCE = ROOT.parent / "shared" / "data" / "xdial-eval"
DEFAULT_OUT = ROOT / "bench" / "out" / "multilingual"

#: level -> (steps, validation pairs kept, [(variant name, data overrides, discriminative overrides)])
SWEEP: dict[str, tuple[int, int, list[tuple[str, dict[str, Any], dict[str, Any]]]]] = {
    "turn": (
        80,
        800,
        [
            ("shipped: LoRA r16 top 4 layers, lr 1e-3, 25% hard negatives, 3 context turns", {}, {}),
            ("lr 3e-4", {}, {"train": {"learning_rate": 3e-4}}),
            ("1 context turn", {}, {"context_turns": 1}),
        ],
    ),
    "dialogue": (
        40,
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
                "end_to_end_s": END_TO_END.get(name, (None, ""))[0],
                "end_to_end_how": END_TO_END.get(name, (None, ""))[1],
            }
        )
    return out


def xdial(source: Path, out: Path) -> dict[str, Any]:
    """Per level: the shipped evaluator's xDial-Eval results (per language: Pearson / Spearman value,
    CI and per-set values), from ``out/e5-lora-<level>/results.json`` or a new run there."""
    from bench.multilingual_table import LANGS, TASKS
    from harness.run.runner import RunConfig, run

    res: dict[str, Any] = {}
    for level, name in SHIPPED.items():
        path = out / f"e5-lora-{level}" / "results.json"
        if not path.is_file():
            print(f"[xdial] harness run --judge evaluator:{name} --task {TASKS[level]}", file=sys.stderr)
            run(
                RunConfig(
                    judge=f"evaluator:{name}",
                    tasks=[TASKS[level]],
                    source=str(source),
                    output_dir=path.parent,
                    show_progress=True,
                )
            )
        doc = json.loads(path.read_text("utf-8"))
        per = doc["results"][TASKS[level]]
        res[level] = {
            "judge": f"evaluator:{name}",
            "n_items": doc["run"].get("n_items"),
            "scoring_s": (doc.get("timings") or {}).get("scoring_s"),
            "languages": {
                lang: {
                    m: {
                        k: v
                        for k, v in (per[lang].get(m) or {}).items()
                        if k in ("value", "ci", "n", "per_dataset")
                    }
                    for m in ("pearson", "spearman")
                }
                for lang in LANGS
                if lang in per
            },
        }
    return res


def xdial_markdown(x: dict[str, Any]) -> list[str]:
    from bench.multilingual_table import LANGS, PAPER

    out = [
        "**xDial-Eval, 10 languages** (shared sets, full size; Pearson, mean over the sets of each language, "
        "95% bootstrap CI; Spearman below)",
        "",
        "| evaluator | " + " | ".join(LANGS) + " | mean | min |",
        "|---|" + "---:|" * (len(LANGS) + 2),
    ]
    for metric in ("pearson", "spearman"):
        for level, r in x.items():
            vals = [(r["languages"].get(lang, {}).get(metric) or {}) for lang in LANGS]
            got = [v["value"] for v in vals if v.get("value") is not None]
            cells = [
                f"{v['value']:.3f} [{v['ci'][0]:.2f}, {v['ci'][1]:.2f}]"
                if v.get("ci")
                else _f(v.get("value"))
                for v in vals
            ]
            mean = sum(got) / len(got) if got else None
            out.append(
                f"| `{r['judge']}` ({level}, {metric}) | "
                + " | ".join(cells)
                + f" | **{_f(mean)}** | {_f(min(got) if got else None)} |"
            )
    for (level, name), vals in PAPER.items():
        out.append(
            f"| *{name}, {level}* | "
            + " | ".join(f"*{v:.3f}*" for v in vals)
            + f" | *{sum(vals) / len(vals):.3f}* | *{min(vals):.3f}* |"
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
        "training loop | end to end, cold | validation AUC | accuracy |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in res.get("shipped", []):
        v = r.get("validation") or {}
        lines.append(
            f"| `evaluator:{r['evaluator']}` | {r['level']} | {r['data']['examples']} | {r['steps']} | "
            f"{r['trainable_parameters']:,} | {r['cached_sequences']:,} | {r['train_wall_s'] / 60:.1f} min | "
            f"{_f(r['end_to_end_s'] and r['end_to_end_s'] / 60, '.1f')}"
            f"{' min' if r['end_to_end_s'] else ''} | "
            f"{_f(v.get('auc'), '.4f')} | {_f(v.get('accuracy'))} |"
        )
    hows = [
        f"`{r['evaluator']}`: {r['end_to_end_how']}"
        for r in res.get("shipped", [])
        if r.get("end_to_end_how")
    ]
    if hows:
        lines += ["", "End to end, cold, measured as: " + "; ".join(hows) + "."]
    if res.get("xdial"):
        lines += ["", *xdial_markdown(res["xdial"])]
    return "\n".join(lines).lstrip("\n") + "\n"


def main() -> int:
    from bench.docs_tables import add_docs_options, finish, handle_docs_only, machine, previous

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sweep", action="store_true", help="rerun the hyper-parameter search (~12 min CPU)")
    ap.add_argument("--levels", default="turn,dialogue")
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--xdial", action="store_true", help="score the shipped evaluators on xDial-Eval")
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="run folders (results.json reused)")
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
    if args.xdial:
        if not args.source.is_dir():
            sys.exit(f"xDial-Eval source {args.source} not found (pass --source ../shared/data/xdial-eval)")
        res["xdial"] = xdial(args.source, args.out)
    print(markdown(res))
    finish(args, MODULE, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
