"""The E5 evaluators' full-data GPU run, next to the CPU-trained ones, as a docs table.

    .venv/bin/python bench/e5/gpu_report.py --from DIR [--from DIR ...] [--write-docs] [--docs-only]

Each ``DIR`` is the ``--out`` folder of one ``bash bench/e5/gpu_full.sh --source DATA --out DIR`` run:
``<name>.tgz`` (the trained adapter folder and its card), ``results-<name>.json`` (``harness run`` of
the adapter on the full xDial-Eval sets of its level, scored on the GPU) and ``gpu_full.log``. A later
``DIR`` replaces an earlier one's entries of the same evaluator. Per evaluator: training pairs, steps,
training-loop seconds, samples/s, mixed precision, library versions, held-out pair AUC; xDial-Eval
Pearson / Spearman per language with 95% CIs; and the CPU-trained evaluator of the same level from
``bench/results/e5_evaluators.json`` (``python bench/e5/evaluators.py --xdial``) as the comparison.
``--with RUN`` adds the xDial-Eval results of a ``harness run`` folder made on this machine (e.g. the
shipped GPU adapter's ``mean:`` ensemble with the cross-lingual evaluator, or the adapter rescored on
CPU) as a further row; ``--keep`` keeps the evaluators already in the committed JSON (no ``--from``).

Writes bench/results/e5_gpu_full.json (the docs block ``e5_gpu_full`` of docs/finetuning.md).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tarfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "e5_gpu_full.json"
CPU_RESULTS = ROOT / "bench" / "results" / "e5_evaluators.json"
MODULE = "bench.e5.gpu_report"
LANGS = ("en", "zh", "es", "de", "fr", "ja", "ko", "hi", "ar", "ru")
LEVEL_TASK = {"turn": "xdial-eval-turn", "dialogue": "xdial-eval-dialogue"}


def _meta_from_tgz(path: Path) -> dict[str, Any]:
    with tarfile.open(path) as tf:
        for m in tf.getmembers():
            if m.name.endswith("/dialeval_evaluator.json"):
                f = tf.extractfile(m)
                assert f is not None
                return json.loads(f.read().decode("utf-8"))
    raise SystemExit(f"{path}: no dialeval_evaluator.json inside (not a gpu_full.sh adapter tarball)")


def _languages(doc: dict[str, Any], task: str) -> dict[str, Any]:
    per = doc["results"][task]
    return {
        lang: {
            m: {k: v for k, v in (per[lang].get(m) or {}).items() if k in ("value", "ci", "n", "per_dataset")}
            for m in ("pearson", "spearman")
        }
        for lang in (*LANGS, "all")
        if lang in per
    }


def collect(dirs: list[Path]) -> dict[str, Any]:
    """The evaluators of the given gpu_full.sh output folders."""
    out: dict[str, Any] = {}
    for d in dirs:
        log = (d / "gpu_full.log").read_text("utf-8") if (d / "gpu_full.log").is_file() else ""
        gpu = re.search(r"^(NVIDIA [^,\n]+), (\d+) MiB", log, re.M)
        for tgz in sorted(d.glob("*.tgz")):
            name = tgz.name.removesuffix(".tgz")
            meta = _meta_from_tgz(tgz)
            level = "dialogue" if meta["levels"].get("dialogue") else "turn"
            doc = json.loads((d / f"results-{name}.json").read_text("utf-8"))
            tr, dv = meta["train_result"], meta["data_version"]
            out[name] = {
                "level": level,
                "device": gpu.group(1) if gpu else None,
                "data": {k: dv.get(k) for k in ("name", "version", "examples", "fingerprint")},
                "frozen_layers": meta["frozen_layers"],
                "trainable_parameters": meta["trainable_parameters"],
                "batch_size": meta["config"]["train"]["batch_size"],
                "steps": tr["steps"],
                "train_s": tr["train_seconds"],
                "prepare_s": (meta.get("timings") or {}).get("prepare_s"),
                "samples_per_s": tr["samples_per_second"],
                "mixed_precision": tr["mixed_precision"],
                "versions": meta.get("versions"),
                "validation": {k: meta["eval"].get(k) for k in ("auc", "accuracy", "n")},
                "xdial": {
                    "n_items": doc["run"].get("n_items"),
                    "scoring_s": (doc.get("timings") or {}).get("scoring_s"),
                    "languages": _languages(doc, LEVEL_TASK[level]),
                },
            }
    return out


def run_row(run_dir: Path) -> dict[str, Any]:
    """A ``harness run`` folder (results.json) as a table row: judge, level, per-language results."""
    doc = json.loads((run_dir / "results.json").read_text("utf-8"))
    task = next(t for t in doc["results"] if t in LEVEL_TASK.values())
    level = next(lvl for lvl, t in LEVEL_TASK.items() if t == task)
    return {
        "judge": doc["judge"]["spec"],
        "level": level,
        "n_items": doc["run"].get("n_items"),
        "scoring_s": (doc.get("timings") or {}).get("scoring_s"),
        "languages": _languages(doc, task),
    }


def _cpu_rows() -> dict[str, Any]:
    if not CPU_RESULTS.is_file():
        return {}
    cpu = json.loads(CPU_RESULTS.read_text("utf-8"))
    return {lvl: x for lvl, x in (cpu.get("xdial") or {}).items()}


def _cells(langs: dict[str, Any], metric: str) -> list[str]:
    vals, cells = [], []
    for lang in LANGS:
        e = (langs.get(lang) or {}).get(metric) or {}
        v = e.get("value")
        if v is None:
            cells.append("—")
            continue
        vals.append(v)
        ci = e.get("ci") or [None, None]
        cells.append(f"{v:.3f} [{ci[0]:.2f}, {ci[1]:.2f}]" if None not in ci else f"{v:.3f}")
    mean = sum(vals) / len(vals) if vals else None
    return [*cells, f"**{mean:.3f}**" if mean is not None else "—", f"{min(vals):.3f}" if vals else "—"]


def markdown(res: dict[str, Any]) -> str:
    ev = res.get("evaluators") or {}
    lines = [
        f"**Full-data configurations on one {res.get('device') or 'GPU'}** (bf16, {res.get('date', '?')}, "
        "`bash bench/e5/gpu_full.sh --source DIR --out DIR`; scored there on the full sets)",
        "",
        "| evaluator | level | training pairs | batch | steps | layers adapted | training loop | pairs/s | "
        "validation AUC | accuracy |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for name, r in ev.items():
        v = r["validation"]
        lines.append(
            f"| `evaluator:{name}` | {r['level']} | {r['data']['examples']:,} | {r['batch_size']} | {r['steps']} | "
            f"{12 - r['frozen_layers']} of 12 | {r['train_s']:.0f} s | {r['samples_per_s']:,.0f} | "
            f"{v['auc']:.4f} | {v['accuracy']:.3f} |"
        )
    lines += [
        "",
        "xDial-Eval, 10 languages, full size (Pearson, mean over the sets of each language, 95% bootstrap "
        "CI), against the CPU-trained evaluator of the same level:",
        "",
        "| evaluator | " + " | ".join(LANGS) + " | mean | min |",
        "|---|" + "---:|" * (len(LANGS) + 2),
    ]
    cpu = res.get("cpu") or {}
    for level in ("turn", "dialogue"):
        for name, r in ev.items():
            if r["level"] == level:
                lines.append(
                    f"| `evaluator:{name}` (GPU, {level}) | "
                    + " | ".join(_cells(r["xdial"]["languages"], "pearson"))
                    + " |"
                )
        if level in cpu:
            c = cpu[level]
            lines.append(
                f"| `{c['judge']}` (CPU, {level}) | " + " | ".join(_cells(c["languages"], "pearson")) + " |"
            )
        for r in res.get("runs") or []:
            if r["level"] == level:
                lines.append(
                    f"| `{r['judge']}` (scored on the CPU machine, {level}) | "
                    + " | ".join(_cells(r["languages"], "pearson"))
                    + " |"
                )
    return "\n".join(lines) + "\n"


def _mean(langs: dict[str, Any]) -> float:
    vals = [langs[x]["pearson"]["value"] for x in LANGS if x in langs and langs[x].get("pearson")]
    return sum(vals) / len(vals)


def sentence(res: dict[str, Any]) -> str:
    """One line for docs/features.md: the GPU-trained turn evaluator and the best ensemble with it."""
    ev = res.get("evaluators") or {}
    turn = [(n, r) for n, r in ev.items() if r["level"] == "turn"]
    if not turn:
        return ""
    name, r = turn[0]
    langs = r["xdial"]["languages"]
    low = min((x for x in LANGS if x in langs), key=lambda x: langs[x]["pearson"]["value"])
    out = (
        f"Trained on one {res.get('device') or 'GPU'} (bf16) on 3.3x the pairs with all 12 layers adapted "
        f"(`finetune/configs/{name}.yaml`, {r['train_s']:.0f} s of training), the turn-level cross-encoder "
        f"`evaluator:{name}` reaches **{_mean(langs):.3f}** turn-level Pearson over the 10 languages "
        f"(lowest {langs[low]['pearson']['value']:.3f}, {low})"
    )
    ens = [x for x in res.get("runs") or [] if x["level"] == "turn" and x["judge"].startswith("mean:")]
    if ens:
        best = max(ens, key=lambda x: _mean(x["languages"]))
        bl = best["languages"]
        blow = min((x for x in LANGS if x in bl), key=lambda x: bl[x]["pearson"]["value"])
        out += (
            f"; its `mean:` ensemble `{best['judge']}` reaches **{_mean(bl):.3f}** "
            f"(lowest {bl[blow]['pearson']['value']:.3f}, {blow})"
        )
    return out + " (`python bench/e5/gpu_report.py`; the paper's PoE: 0.431).\n"


def main() -> int:
    from bench.docs_tables import add_docs_options, finish, handle_docs_only, machine

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--from",
        dest="dirs",
        type=Path,
        action="append",
        default=[],
        help="the --out folder of a gpu_full.sh run",
    )
    ap.add_argument(
        "--with", dest="runs", type=Path, action="append", default=[], help="a harness run folder"
    )
    ap.add_argument(
        "--keep", action="store_true", help="keep the committed JSON's GPU evaluators (no --from)"
    )
    add_docs_options(ap, MODULE)
    args = ap.parse_args()
    if handle_docs_only(args, MODULE):
        return 0
    old = json.loads(RESULTS.read_text("utf-8")) if RESULTS.is_file() else {}
    if args.keep:
        if not old.get("evaluators"):
            ap.error(f"--keep: {RESULTS.relative_to(ROOT)} holds no GPU evaluators yet")
        res = {k: old[k] for k in ("date", "device", "evaluators")}
    elif args.dirs:
        evaluators = collect(args.dirs)
        devices = {r["device"] for r in evaluators.values() if r["device"]}
        res = {
            "date": machine()["date"],
            "device": ", ".join(sorted(devices)) or None,
            "evaluators": evaluators,
        }
    else:
        ap.error("--from DIR (the --out folder of bench/e5/gpu_full.sh) or --keep is required")
    res["cpu"] = _cpu_rows()
    res["runs"] = [{**run_row(r), "machine": machine()} for r in args.runs]
    print(markdown(res))
    finish(args, MODULE, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
