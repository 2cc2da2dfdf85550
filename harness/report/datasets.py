"""Reports on built dataset versions: agreement statistics, comparisons with the source paper
(defined by each builder), and the difference between two versions (used by ``harness datasets show`` / ``diff``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from harness.data.layout import data_file
from harness.data.schema import Dimension
from harness.meta.agreement import ALPHA_LEVEL

_SHOWN = {
    "n_items": "items",
    "percent_agreement": "percent",
    "adjacent_agreement": "adjacent",
    "alpha": "alpha",
    "cohen_mean": "cohen_k",
    "fleiss_kappa": "fleiss_k",
    "bucket_full": "full",
    "bucket_majority": "majority",
    "bucket_plurality": "plurality",
    "bucket_none": "none",
}


def read_config(path: Path, config: str) -> pd.DataFrame:
    return pd.read_parquet(path / data_file(config))


def label_frame(rows: pd.DataFrame) -> pd.DataFrame:
    out = []
    for rid, lang, system, labels in zip(
        rows["id"], rows["language"], rows["system"], rows["labels"], strict=True
    ):
        for lab in labels:
            out.append(
                {
                    "item": rid,
                    "annotator": lab["annotator"],
                    "value": lab["value"],
                    "dimension": lab["dimension"],
                    "language": lang,
                    "system": system or "-",
                }
            )
    return pd.DataFrame(out, columns=["item", "annotator", "value", "dimension", "language", "system"])


def _levels(manifest: dict[str, Any]) -> dict[str, str]:
    return {d["name"]: ALPHA_LEVEL[Dimension.from_dict(d).scale] for d in manifest.get("dimensions", [])}


def agreement_tables(
    path: Path, manifest: dict[str, Any], by: list[str] | None = None
) -> list[tuple[str, pd.DataFrame]]:
    """Per config with labels: agreement per dimension (and per ``by`` group)."""
    from harness.meta.agreement import agreement_table

    out = []
    for config in manifest["configs"]:
        frame = label_frame(read_config(path, config))
        if frame.empty or frame["value"].notna().sum() == 0:
            continue
        table = agreement_table(frame, by=list(by or []), dimension_levels=_levels(manifest))
        cols = ["dimension", *(by or []), *_SHOWN]
        out.append((f"{config}: inter-annotator agreement", table[cols].rename(columns=_SHOWN)))
    return out


def paper_comparisons(path: Path, manifest: dict[str, Any]) -> list[tuple[str, pd.DataFrame]]:
    """Tables that set the version's statistics next to the numbers its source paper reports, as
    the version's builder defines them (``Builder.paper_comparisons``; none for most builders)."""
    from harness.data.builders import builder_class

    try:
        cls = builder_class(manifest["builder"]["name"])
    except KeyError:  # built by a builder that is not installed here
        return []
    return list(cls.paper_comparisons(path, manifest))


def _row_key(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))


def diff_versions(a: Path, b: Path) -> dict[str, Any]:
    ma = json.loads((a / "build_manifest.json").read_text(encoding="utf-8"))
    mb = json.loads((b / "build_manifest.json").read_text(encoding="utf-8"))
    summary: list[str] = []
    if ma["builder"] != mb["builder"]:
        summary.append(f"builder: {ma['builder']} -> {mb['builder']}")
    if ma.get("options") != mb.get("options"):
        summary.append(f"options: {ma.get('options')} -> {mb.get('options')}")
    ia = {(i["config"], i["file"]): i["sha256"] for i in ma["inputs"]}
    ib = {(i["config"], i["file"]): i["sha256"] for i in mb["inputs"]}
    for k in sorted(ia.keys() - ib.keys()):
        summary.append(f"input removed: {k[0]}/{k[1]}")
    for k in sorted(ib.keys() - ia.keys()):
        summary.append(f"input added: {k[0]}/{k[1]}")
    for k in sorted(ia.keys() & ib.keys()):
        if ia[k] != ib[k]:
            summary.append(f"input changed: {k[0]}/{k[1]} sha256 {ia[k][:12]} -> {ib[k][:12]}")
    if ma.get("fingerprint") == mb.get("fingerprint"):
        summary.append("same fingerprint (same builder version, inputs and options)")
    configs: dict[str, Any] = {}
    identical = True
    for c in sorted(set(ma["configs"]) | set(mb["configs"])):
        ra = read_config(a, c) if c in ma["configs"] else None
        rb = read_config(b, c) if c in mb["configs"] else None
        if ra is None or rb is None:
            summary.append(f"config {'added' if ra is None else 'removed'}: {c}")
            identical = False
        da = {} if ra is None else {r["id"]: r for r in ra.to_dict("records")}
        db = {} if rb is None else {r["id"]: r for r in rb.to_dict("records")}
        changed_cols: dict[str, int] = {}
        changed = 0
        for rid in da.keys() & db.keys():
            cols = [
                k for k in set(da[rid]) | set(db[rid]) if _row_key(da[rid].get(k)) != _row_key(db[rid].get(k))
            ]
            if cols:
                changed += 1
                for k in cols:
                    changed_cols[k] = changed_cols.get(k, 0) + 1
        added, removed = len(db.keys() - da.keys()), len(da.keys() - db.keys())
        identical = identical and not (added or removed or changed)
        configs[c] = {
            "rows_a": len(da),
            "rows_b": len(db),
            "added": added,
            "removed": removed,
            "changed": changed,
            "changed_columns": dict(sorted(changed_cols.items())),
        }
    return {"summary": summary, "configs": configs, "identical": identical}
