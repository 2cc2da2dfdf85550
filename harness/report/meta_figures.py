"""Figures of the meta-evaluation sections of ``harness report`` (:mod:`harness.report.meta`),
drawn from the rows that module builds: the alternative annotator test (ρ_j per annotator),
human ceilings, the judges' error correlation heatmap and translation QA per language.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.report.figures import _colors, _num, _pyplot, _save


def alt_test_figure(per: list[list[str]], path: Path, title: str) -> Path:
    plt = _pyplot()
    rows = [r for r in per if _num(_float(r[5])) is not None]
    fig, ax = plt.subplots(figsize=(max(5, 0.5 * len(rows) + 2), 3.2))
    colors = _colors(len({r[2] for r in rows}) or 1)
    envs = list(dict.fromkeys(r[2] for r in rows))
    for k, r in enumerate(rows):
        c = colors[envs.index(r[2])]
        ax.bar(
            k,
            float(r[5]),
            color=c if r[7] == "yes" else "white",
            edgecolor=c,
            hatch=None if r[7] == "yes" else "//",
        )
    ax.set_xticks(range(len(rows)), [f"{r[3]}\n{r[2]}" for r in rows], rotation=90, fontsize=7)
    ax.axhline(0.5, color="black", lw=0.8, ls="--")
    ax.set_ylim(0, 1)
    ax.set_ylabel("ρ_j")
    ax.set_title(title, fontsize=9)
    return _save(fig, path)


def ceiling_figure(groups: list[tuple[str, list[str]]], path: Path) -> Path:
    """Grouped bars: judge, one annotator vs the rest, split-half ceiling (cells as formatted in the tables)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(groups) + 2), 3.4))
    names = ["judge", "one annotator vs rest", "split-half ceiling"]
    colors = _colors(3)
    for k in range(3):
        vals = [_float(cells[k].split(" ")[0].rstrip("*")) for _, cells in groups]
        ax.bar(
            [i + 0.27 * k for i in range(len(groups))],
            [v if v is not None else 0 for v in vals],
            0.27,
            color=colors[k],
            label=names[k],
        )
    ax.set_xticks([i + 0.27 for i in range(len(groups))], [g for g, _ in groups], fontsize=7)
    ax.set_ylim(min(0, ax.get_ylim()[0]), 1)
    ax.legend(fontsize=7)
    ax.set_title("correlation with the human rating vs human ceilings", fontsize=9)
    return _save(fig, path)


def short_name(name: str, width: int = 28) -> str:
    return name if len(name) <= width else "…" + name[-(width - 1) :]


def _float(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None


def error_heatmap(pairs: Mapping[str, float | None], path: Path, title: str) -> Path:
    import numpy as np

    names = list(dict.fromkeys(n for k in pairs for n in k.split(" | ")))
    m = np.eye(len(names))
    for k, v in pairs.items():
        a, b = k.split(" | ")
        m[names.index(a), names.index(b)] = m[names.index(b), names.index(a)] = np.nan if v is None else v
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(1.2 * len(names) + 2, 1.0 * len(names) + 1.5))
    im = ax.imshow(m, vmin=-1, vmax=1, cmap="RdBu_r")
    for i in range(len(names)):
        for j in range(len(names)):
            ax.text(
                j, i, "—" if np.isnan(m[i, j]) else f"{m[i, j]:.2f}", ha="center", va="center", fontsize=8
            )
    short = [short_name(n) for n in names]
    ax.set_xticks(range(len(names)), short, rotation=45, ha="right", fontsize=7)
    ax.set_yticks(range(len(names)), short, fontsize=7)
    fig.colorbar(im, ax=ax, fraction=0.046)
    ax.set_title(title, fontsize=9)
    return _save(fig, path)


def qa_figure(qa: Mapping[str, Any], path: Path) -> Path:
    langs = list((qa.get("languages") or {}).keys())
    cols = [
        c
        for c in ("similarity", "bertscore_f1", "cometkiwi")
        if any(_num((qa["languages"][lg]).get(c)) is not None for lg in langs)
    ]
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(5, 0.7 * len(langs) + 2), 3.2))
    colors = _colors(max(len(cols), 1))
    width = 0.8 / max(len(cols), 1)
    for k, c in enumerate(cols):
        vals = [_num(qa["languages"][lg].get(c)) for lg in langs]
        ax.bar(
            [i + k * width for i in range(len(langs))],
            [v if v is not None else 0 for v in vals],
            width,
            label=c,
            color=colors[k],
        )
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(langs))], [lg.upper() for lg in langs])
    ax.set_ylim(0, 1)
    if cols:
        ax.legend(fontsize=7)
    ax.set_title(f"{(qa.get('dataset') or {}).get('ref')}: translation QA per language", fontsize=9)
    return _save(fig, path)
