"""UPHELD's published numbers next to a built version's (``harness datasets show upheld@X.Y.Z``):
the counts of §3.2 and the per-model agreement of Table 3a."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from harness.report.datasets import _levels, label_frame, read_config

#: UPHELD Table 3a ("Kappa score" per model; custom-model = uma-V0.5 in the files).
UPHELD_TABLE_3A = {
    "gpt3_5": 0.30,
    "gpt4": 0.33,
    "gpt4_rephrase": 0.46,
    "llama3.1-70b-base": 0.38,
    "random": 0.97,
    "uma-V0.5": 0.35,
}


def paper_comparisons(path: Path, manifest: dict[str, Any]) -> list[tuple[str, pd.DataFrame]]:
    """Counts and Table 3a agreement of the ``main`` config against the paper (none without it)."""
    if "main" not in manifest["configs"]:
        return []
    from scipy.stats import spearmanr

    from harness.meta.agreement import agreement_table

    entry = manifest["configs"]["main"]
    counts, paper = entry["counts"], entry.get("paper_counts", {})
    count_rows = [
        ("turns (turn ids)", paper.get("turns"), counts["turn_ids"]),
        ("conversations", paper.get("conversations"), counts["conversations"]),
        ("(turn, model) items", None, counts["items"]),
        ("label sets", paper.get("label_sets"), counts["label_sets"]),
        ("labels", paper.get("labels"), counts["labels"]),
    ]
    counts_frame = pd.DataFrame(
        [{"count": k, "paper": "—" if p is None else str(p), "files": str(v)} for k, p, v in count_rows]
    )
    frame = label_frame(read_config(path, "main"))
    table = agreement_table(frame, by=["system"], dimension_levels=_levels(manifest))
    table = table[table["system"].isin(UPHELD_TABLE_3A)]
    rows = []
    for system, kappa in UPHELD_TABLE_3A.items():
        row: dict[str, Any] = {"system": system, "paper_kappa": kappa}
        for dim in ("content", "style", "reasonableness"):
            sub = table[(table["system"] == system) & (table["dimension"] == dim)]
            if len(sub):
                row[f"{dim}_percent"] = float(sub["percent_agreement"].iloc[0])
                row[f"{dim}_fleiss"] = float(sub["fleiss_kappa"].iloc[0])
        rows.append(row)
    t3 = pd.DataFrame(rows)
    rank_rows = []
    for col in [c for c in t3.columns if c not in ("system", "paper_kappa")]:
        rho = spearmanr(t3["paper_kappa"], t3[col]).statistic
        mae = float((t3[col] - t3["paper_kappa"]).abs().mean())
        rank_rows.append({"statistic": col, "spearman_vs_paper": float(rho), "mean_abs_diff": mae})
    return [
        ("UPHELD main: counts in the files vs the paper (§3.2)", counts_frame),
        ("UPHELD main: Table 3a 'Kappa score' per model vs our per-model agreement", t3),
        ("UPHELD main: which of our statistics tracks Table 3a", pd.DataFrame(rank_rows)),
    ]
