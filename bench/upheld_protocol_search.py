"""Which correlation protocol reproduces UPHELD's ROUGE rows (Tables 7–9)?  Evidence for the
reproduction note: every combination of human target × coefficient × system subset × stemming,
scored by the worst |ours − paper| over the four ROUGE rows of each (dataset, dimension) cell.

    python bench/upheld_protocol_search.py --source ../shared/data/upheld [--top 3]

Full-set values (no folds), so the search is quick; the chosen protocol is then run with folds
by ``harness reproduce upheld``.
"""

from __future__ import annotations

import argparse
import itertools
import warnings

import numpy as np
import pandas as pd

from harness.cache import RequestCache
from harness.judges.metric import ReferenceFeatures, reference_inputs
from harness.meta.scale_correlation import app_b_correlation, human_targets
from tasks.upheld import paper as paper
from tasks.upheld.protocols import DIMENSIONS
from tasks.upheld.reproduce import ReproduceConfig, load_records

TARGETS = ("rows", "mean", "majority")
METHODS = ("auto", "pearson", "spearman", "kendall", "cramers_v")  # auto = App. B by label scale
SUBSETS = {"all systems": (), "without random": ("random",), "without both baselines": paper.BASELINE_SYSTEMS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default="../shared/data/upheld")
    ap.add_argument("--top", type=int, default=3)
    args = ap.parse_args()
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
                for target, method, (sub_name, excl) in itertools.product(TARGETS, METHODS, SUBSETS.items()):
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
    for config in records:
        worst = df[df["config"] == config].groupby(key)["max_abs_diff"].max().sort_values()
        print(f"\n== one protocol for all three dimensions of {config}: best worst-case |Δ|")
        print(worst.head(args.top).to_string())


if __name__ == "__main__":
    main()
