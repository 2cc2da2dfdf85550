"""Correlations at aggregation levels (ComperDial §6.2–6.3, Tables 4–5): judge scores and human
ratings averaged per dialogue (per ``(system, dialogue_id)``) or per system, then correlated.

A task asks for them with ``TaskSpec.levels`` (``"dialogue"``, ``"system"``). Per dataset × language
the judge's mean skips parse failures (``None`` scores) and the human mean uses every item, as
footnotes 9 and 11 ("averaging turn-level (or dialogue) scores of all turns (or dialogues) in a
system"); a group whose every judge score failed is left out. Entries go into ``results.json`` as
``"<level>/<metric>"`` next to the item-level metrics, with a percentile bootstrap CI over groups and
the per-language value as the mean over datasets (as :func:`harness.meta.correlation.meta_evaluate`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NotRequired, TypedDict

import numpy as np
import pandas as pd

from harness.meta.correlation import CorrelationEntry, _replicates, correlation, percentile_ci

KEYS = {"dialogue": ["system", "dialogue_id"], "system": ["system"]}


class LevelCorrelationEntry(CorrelationEntry):
    """One dataset × language of :func:`level_correlations`: the correlation over the groups."""

    parse_failures: int  # items whose judge score failed
    groups: int


class LanguageMean(TypedDict):
    """A language's entry of :func:`aggregate`: the mean over its datasets (each under ``per_dataset``)."""

    value: float | None
    ci: list[float | None] | None
    n: int
    n_datasets: int
    parse_failures: int
    per_dataset: dict[str, Mapping[str, object]]
    note: NotRequired[str]


class OverallMean(TypedDict):
    """The ``all`` entry of :func:`aggregate`: the mean over the languages."""

    value: float | None
    ci: list[float | None] | None
    n: int
    n_languages: int
    parse_failures: int
    note: NotRequired[str]


#: :func:`aggregate`: language (and ``all``) -> entry key -> entry
MeanTable = dict[str, dict[str, LanguageMean] | dict[str, OverallMean]]


def _ci(entry: Mapping[str, object]) -> list[float | None] | None:
    """An entry's ``[low, high]`` (a tuple becomes a list, as results.json writes it)."""
    ci = entry.get("ci")
    if isinstance(ci, tuple):
        return list(ci)
    return ci if isinstance(ci, list) else None


def _number(entry: Mapping[str, object], key: str) -> float | None:
    """A numeric field of an entry, None when it is missing or not a number."""
    x = entry.get(key)
    if isinstance(x, np.integer | np.floating):
        return float(x)
    return x if isinstance(x, int | float) and not isinstance(x, bool) else None


def level_frame(samples: pd.DataFrame, level: str) -> pd.DataFrame:
    """Per group of ``level``: mean judge score (parse failures skipped), mean human rating, item counts."""
    keys = KEYS[level]
    missing = [k for k in keys if k not in samples.columns]
    if missing:
        raise ValueError(f"{level}-level correlations need sample column(s) {missing}")
    df = samples.dropna(subset=keys).copy()
    df["score"] = pd.to_numeric(df["score"], errors="coerce")
    df["human"] = pd.to_numeric(df["human"], errors="coerce")
    g = df.groupby(keys, sort=True)
    out = pd.DataFrame({"score": g["score"].mean(), "human": g["human"].mean(), "n_items": g.size()})
    return out.reset_index()


def aggregate(
    per_group: Mapping[tuple[str, str], Mapping[str, Mapping[str, object]]],
) -> MeanTable:
    """Per-(dataset, language) entries ``{value, ci, n, parse_failures, ...}`` -> per language (mean over
    datasets, each dataset's entry under ``per_dataset``; the CI is kept when one dataset makes the
    language) and ``"all"`` (mean over languages; the CI kept for a single language), as
    :func:`harness.meta.correlation.meta_evaluate` averages."""
    langs: dict[str, dict[str, dict[str, Mapping[str, object]]]] = {}
    for (ds, lang), entries in per_group.items():
        for key, e in entries.items():
            langs.setdefault(str(lang), {}).setdefault(key, {})[str(ds)] = e
    out: dict[str, dict[str, LanguageMean]] = {}
    for lang, metrics in langs.items():
        out[lang] = {}
        for key, by_ds in metrics.items():
            vals = [v for e in by_ds.values() if (v := _number(e, "value")) is not None]
            out[lang][key] = {
                "value": float(np.mean(vals)) if vals else None,
                "ci": _ci(next(iter(by_ds.values()))) if len(by_ds) == 1 else None,
                "n": int(sum(_number(e, "n") or 0 for e in by_ds.values())),
                "n_datasets": len(vals),
                "parse_failures": int(sum(_number(e, "parse_failures") or 0 for e in by_ds.values())),
                "per_dataset": by_ds,
            }
            if not vals:
                out[lang][key]["note"] = "undefined in every dataset (see per_dataset)"
    if not out:
        return {}
    overall: dict[str, OverallMean] = {}
    for key in dict.fromkeys(k for m in out.values() for k in m):
        have = [lang for lang in langs if key in out[lang]]
        vals = [v for lang in have if (v := out[lang][key]["value"]) is not None]
        overall[key] = {
            "value": float(np.mean(vals)) if vals else None,
            "ci": out[have[0]][key]["ci"] if len(have) == 1 else None,
            "n": int(sum(out[lang][key]["n"] for lang in have)),
            "n_languages": len(vals),
            "parse_failures": int(sum(out[lang][key]["parse_failures"] for lang in have)),
        }
        if not vals:
            overall[key]["note"] = "undefined in every language"
    table: MeanTable = {**out}
    table["all"] = overall
    return table


def level_correlations(
    samples: pd.DataFrame,
    levels: Sequence[str],
    methods: Sequence[str],
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> MeanTable:
    """``{language: {"<level>/<metric>": entry}}`` plus ``"all"`` (mean over languages). ``samples``:
    one task's rows with ``dataset``, ``language``, ``score``, ``human`` and the level's keys."""
    per_group: dict[tuple[str, str], dict[str, LevelCorrelationEntry]] = {}
    for level in levels:
        if any(k not in samples.columns or samples[k].isna().all() for k in KEYS[level]):
            continue  # no system / dialogue ids in this data: nothing to aggregate
        for (ds, lang), sub in samples.groupby(["dataset", "language"], sort=True):
            frame = level_frame(sub, level)
            valid = frame[frame["score"].notna() & frame["human"].notna()]
            x, y = valid["score"].to_numpy(np.float64), valid["human"].to_numpy(np.float64)
            idx = None
            if n_bootstrap > 0 and len(valid) >= 3:
                idx = np.random.default_rng([seed, len(valid)]).integers(
                    0, len(valid), (n_bootstrap, len(valid))
                )
            for m in methods:
                est = correlation(x, y, m)
                if idx is not None:
                    est.ci = percentile_ci(_replicates(x, y, idx, m), confidence)
                entry: LevelCorrelationEntry = {
                    **est.to_dict(),
                    "parse_failures": int(frame["score"].isna().sum()),
                    "groups": len(frame),
                }
                per_group.setdefault((str(ds), str(lang)), {})[f"{level}/{m}"] = entry
    return aggregate(per_group)
