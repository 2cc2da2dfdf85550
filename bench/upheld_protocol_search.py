"""Which correlation protocol reproduces UPHELD's ROUGE rows (Tables 7–9)?  Evidence for the
reproduction note: every combination of human target × coefficient × system subset × stemming,
scored by the worst |ours − paper| over the four ROUGE rows of each (dataset, dimension) cell.

    python bench/upheld_protocol_search.py --source ../shared/data/upheld [--top 3]

Full-set values (no folds), so the search is quick; the chosen protocol is then run with folds
by ``harness reproduce upheld``.

Writes bench/results/upheld_protocol_search.json (committed: the table in bench/README.md is rendered
from it, ``--write-docs``; ``--docs-only`` rewrites it from the committed JSON).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MODULE = "bench.upheld_protocol_search"
RESULTS = ROOT / "bench" / "results" / "upheld_protocol_search.json"
TARGETS = ("rows", "mean", "majority")
METHODS = ("auto", "pearson", "spearman", "kendall", "cramers_v")  # auto = App. B by label scale


def markdown(r: dict) -> str:
    """bench/README.md: per dataset, the protocols whose worst |ours − paper| over every ROUGE row of
    every dimension is smallest, and the best protocol of each (dataset, dimension) cell."""
    lines = [
        f"Result ({r['machine']['date']}, `--source {r['source']}`, {r['combinations']} protocols per "
        "dataset): the protocols closest to the paper on all four ROUGE rows of all three dimensions "
        "(worst |ours − paper| over the 12 numbers; `auto` = App. B's coefficient by label scale: "
        "Cramér's V for Likert labels, point-biserial for binary ones):",
        "",
        "| dataset | human target | coefficient | systems | stemmer | worst \\|Δ\\| |",
        "|---|---|---|---|---|---:|",
    ]
    for config, best in r["one_protocol"].items():
        for row in best:
            lines.append(
                f"| {config} | {row['target']} | {row['method']} | {row['systems']} | "
                f"{'yes' if row['stemmer'] else 'no'} | {row['worst_abs_diff']:.3f} |"
            )
    lines += [
        "",
        "Best protocol per dataset and dimension (its four ROUGE values vs the paper's):",
        "",
        "| dataset | dimension | human target | coefficient | systems | stemmer | ours | paper | max \\|Δ\\| |",
        "|---|---|---|---|---|---|---|---|---:|",
    ]
    for cell in r["cells"]:
        b = cell["top"][0]
        lines.append(
            f"| {cell['config']} | {cell['dimension']} | {b['target']} | {b['method']} | {b['systems']} | "
            f"{'yes' if b['stemmer'] else 'no'} | {' '.join(f'{v:.2f}' for v in b['values'])} | "
            f"{' '.join(f'{v:.2f}' for v in cell['paper'])} | {b['max_abs_diff']:.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default="../shared/data/upheld")
    ap.add_argument("--top", type=int, default=3)
    from bench.docs_tables import add_docs_options, finish, handle_docs_only, machine

    add_docs_options(ap, MODULE)
    args = ap.parse_args()
    if handle_docs_only(args, MODULE):
        return
    where = machine()
    import pandas as pd

    from harness.cache import RequestCache
    from harness.judges.metric import ReferenceFeatures, reference_inputs
    from harness.meta.scale_correlation import app_b_correlation, human_targets
    from tasks.upheld import paper as paper
    from tasks.upheld.protocols import DIMENSIONS
    from tasks.upheld.reproduce import ReproduceConfig, load_records

    subsets = {
        "all systems": (),
        "without random": ("random",),
        "without both baselines": paper.BASELINE_SYSTEMS,
    }
    warnings.simplefilter("ignore")
    _, records = load_records(ReproduceConfig(source=args.source, show_progress=False))
    cache = RequestCache()
    rows = []
    for stem in (False, True):
        feats = ReferenceFeatures(cache, use_stemmer=stem)
        for config, recs in records.items():
            inputs = [reference_inputs(r) for r in recs]
            f = feats.compute([i[0] for i in inputs], [i[1] for i in inputs], paper.TOKEN)
            f["id"] = [r["id"] for r in recs]
            for dim, (scale, levels) in DIMENSIONS.items():
                for target, method, (sub_name, excl) in itertools.product(TARGETS, METHODS, subsets.items()):
                    if target == "mean" and method == "cramers_v":
                        continue  # means are not categories
                    h = human_targets(recs, dim, target).merge(f, on="id")
                    h = h[~h["system"].isin(excl)]
                    vals = []
                    for m in paper.TOKEN:
                        sc = (
                            "binary"
                            if (scale == "binary" and target != "mean")
                            else ("likert" if target != "mean" else "continuous")
                        )
                        vals.append(
                            app_b_correlation(h[m], h["human"], sc, method=method, levels=levels).value
                        )
                    ref = np.array([paper.TABLES[dim][1][m][config][0] for m in paper.TOKEN])
                    rows.append(
                        {
                            "config": config,
                            "dimension": dim,
                            "target": target,
                            "method": method,
                            "systems": sub_name,
                            "stemmer": stem,
                            "values": np.round(vals, 3),
                            "max_abs_diff": float(np.max(np.abs(np.array(vals) - ref))),
                        }
                    )
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 200)
    for (config, dim), g in df.groupby(["config", "dimension"], sort=False):
        ref = [paper.TABLES[dim][1][m][config][0] for m in paper.TOKEN]
        print(f"\n== {config} / {dim}: paper {ref}")
        print(
            g.sort_values("max_abs_diff")
            .head(args.top)
            .drop(columns=["config", "dimension"])
            .to_string(index=False)
        )
    key = ["target", "method", "systems", "stemmer"]
    one_protocol = {}
    for config in records:
        worst = df[df["config"] == config].groupby(key, sort=False)["max_abs_diff"].max()
        worst = worst.sort_values(kind="stable")
        print(f"\n== one protocol for all three dimensions of {config}: best worst-case |Δ|")
        print(worst.head(args.top).to_string())
        one_protocol[config] = [
            {**dict(zip(key, idx, strict=True)), "worst_abs_diff": round(float(v), 4)}
            for idx, v in worst.head(args.top).items()
        ]
    cells = []
    for (config, dim), g in df.groupby(["config", "dimension"], sort=False):
        top = g.sort_values("max_abs_diff", kind="stable").head(args.top)
        cells.append(
            {
                "config": config,
                "dimension": dim,
                "paper": [paper.TABLES[dim][1][m][config][0] for m in paper.TOKEN],
                "top": [
                    {
                        **{k: row[k] for k in key},
                        "values": [float(v) for v in row["values"]],
                        "max_abs_diff": round(float(row["max_abs_diff"]), 4),
                    }
                    for row in top.to_dict("records")
                ],
            }
        )
    n = int(df.groupby("config").size().iloc[0] // len(DIMENSIONS))
    out = {
        "machine": where,
        "source": args.source,
        "metrics": list(paper.TOKEN),
        "combinations": n,
        "one_protocol": one_protocol,
        "cells": cells,
    }
    finish(args, MODULE, _plain(out))


def _plain(x):
    """numpy scalars and bools -> JSON types."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.generic):
        return x.item()
    return x


if __name__ == "__main__":
    main()
