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
    """ρ_j per annotator as small multiples, one panel per (judge, environment): horizontal bars on
    [0, 1] with the 0.5 line, filled where the judge wins against that annotator (after BY), hatched
    where it does not; annotators that were not tested are listed, not drawn."""
    import math

    from matplotlib.patches import Patch

    plt = _pyplot()
    groups: dict[tuple[str, str, str], list[list[str]]] = {}
    for r in per:
        groups.setdefault((r[0], r[1], r[2]), []).append(r)
    judges = {j for _, j, _ in groups}
    tasks = {t for t, _, _ in groups}
    ncols = min(4, max(1, len(groups)))
    nrows = math.ceil(len(groups) / ncols)
    tallest = max((len(rows) for rows in groups.values()), default=1)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(3.3 * ncols, (0.28 * tallest + 1.1) * nrows + 0.6), squeeze=False
    )
    color, miss = _colors(1)[0], "#8a5a00"
    for ax, ((task, judge, env), rows) in zip(axes.flat, groups.items(), strict=False):
        labels = [r[3] for r in rows]
        values = [_float(r[5]) for r in rows]
        for k, (v, r) in enumerate(zip(values, rows, strict=True)):
            if v is None:
                ax.text(0.01, k, "not tested", va="center", fontsize=7, color=miss)
                continue
            win = r[7] == "yes"
            ax.barh(k, v, color=color if win else "white", edgecolor=color, hatch=None if win else "///")
            ax.text(min(v + 0.02, 0.86), k, f"{v:.2f}", va="center", fontsize=7)
        ax.axvline(0.5, color="black", lw=0.8, ls="--")
        ax.set_xlim(0, 1)
        ax.set_yticks(range(len(rows)), labels, fontsize=7)
        ax.invert_yaxis()
        ax.tick_params(axis="x", labelsize=7)
        head = [env]
        if len(tasks) > 1:
            head.insert(0, task)
        if len(judges) > 1:
            head.insert(0, wrap_name(judge, 34))
        ax.set_title("\n".join(head), fontsize=8)
    for ax in list(axes.flat)[len(groups) :]:
        ax.set_visible(False)
    fig.legend(
        handles=[
            Patch(facecolor=color, edgecolor=color, label="judge wins (after BY)"),
            Patch(facecolor="white", edgecolor=color, hatch="///", label="judge does not win"),
        ],
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),  # below the panels; the saved image grows to hold it
        ncol=2,
        fontsize=8,
        frameon=False,
    )
    fig.suptitle(title + " (dashed: ρ = 0.5)", fontsize=9)
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
    """A judge name for a figure label: whole when short, else wrapped onto lines at its own separators
    (``+`` between panel members, ``,`` between options, ``;`` between routes; at most three lines),
    with the middle elided if it is still too long — never cut from the left."""
    return wrap_name(name, width)


def wrap_name(name: str, width: int = 28, max_lines: int = 3) -> str:
    """``name`` on at most ``max_lines`` lines of about ``width`` characters, broken after ``+ , ;``
    (then ``: =``, then anywhere); lines get wider rather than text being dropped."""
    if len(name) <= width:
        return name
    import re

    def pack(w: int) -> list[str]:
        lines: list[str] = []
        for piece in re.split(r"(?<=[+,;])", name):
            parts = re.split(r"(?<=[:=])", piece) if len(piece) > w else [piece]
            for p in parts:
                while len(p) > w:
                    lines.append(p[:w])
                    p = p[w:]
                if lines and len(lines[-1]) + len(p) <= w:
                    lines[-1] += p
                elif p:
                    lines.append(p)
        return lines

    w = width
    while len(lines := pack(w)) > max_lines:
        w += 4
    return "\n".join(lines)


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
