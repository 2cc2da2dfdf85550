"""Rendering layer of ``harness report``: cell formatting, PNG figures, the per-sample issue-rate
tables behind the heatmaps, and the Markdown / self-contained HTML document.

Figures (matplotlib, Agg backend, closed after saving):

* :func:`correlation_bars` — correlation per language per judge, with CIs (MEDAL Fig. 4 / Fig. 11);
* :func:`issue_f1_bars` — F1+ and F1- per issue dimension per judge with the human ceiling
  (MEDAL Fig. 5);
* :func:`rate_heatmap` — annotated % heatmap, optionally with a mean-overall-score column
  (MEDAL Fig. 2 / Fig. 9).
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from numbers import Real
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.run.document import DatasetInfo, MetricEntry

DPI = 130


def slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", s).strip("-")[:60] or "x"


# -- formatting -----------------------------------------------------------------------------------
def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, Real) or math.isnan(float(x)):
        return None
    return float(x)


def fmt_value(x: Any, digits: int = 3) -> str:
    v = _num(x)
    return "—" if v is None else f"{v:.{digits}f}"


def fmt_count(x: Any) -> str:
    v = _num(x)
    if v is None:
        return "—"
    return str(int(v)) if v == int(v) else f"{v:.1f}"


def p_value(entry: MetricEntry | None) -> float | None:
    """The entry's p-value; for a language averaged over a single dataset, that dataset's."""
    if not isinstance(entry, MetricEntry):
        return None
    if _num(entry.p_value) is not None:
        return float(entry.p_value)  # type: ignore[arg-type]
    per = entry.per_dataset or {}
    if len(per) == 1:
        return _num(next(iter(per.values())).p_value)
    return None


def dataset_label(info: DatasetInfo | Mapping[str, object], task: str = "") -> str:
    """``name@version (fingerprint)`` of a run's dataset entry (typed, or its JSON form). A dataset
    built from ``--source`` records its builder's ref (``xdial-eval@1.1.0``) as revision: that is
    not repeated after the name."""
    d = info.model_dump() if isinstance(info, DatasetInfo) else info
    fp = str(d.get("fingerprint") or "")[:12]
    name = str(d.get("builder") or d.get("location") or task)
    rev = str(d.get("revision") or "")
    label = f"{name}@—" if not rev else rev if rev.startswith(f"{name}@") or rev == name else f"{name}@{rev}"
    return label + (f" ({fp})" if fp else "")


def fmt_entry(entry: MetricEntry | None, star: bool = True) -> str:
    """``0.532* [0.41, 0.63]``: value, a star when p < 0.05, the CI when there is one."""
    if not isinstance(entry, MetricEntry) or _num(entry.value) is None:
        return "—"
    p = p_value(entry)
    s = fmt_value(entry.value) + ("*" if star and p is not None and p < 0.05 else "")
    ci = entry.ci
    if ci and _num(ci[0]) is not None and _num(ci[1]) is not None:
        s += f" [{ci[0]:.2f}, {ci[1]:.2f}]"
    return s


def _fnum(x: Any) -> float:
    v = _num(x)
    return math.nan if v is None else v


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # a crowded figure keeps its layout; bbox_inches="tight" still crops
        warnings.filterwarnings("ignore", message="Tight layout not applied", category=UserWarning)
        fig.tight_layout()
    fig.savefig(path, dpi=DPI, bbox_inches="tight", facecolor="white")
    _pyplot().close(fig)
    return path


def _colors(n: int) -> list:
    plt = _pyplot()
    cmap = plt.get_cmap("tab10" if n <= 10 else "tab20")
    return [cmap(i % cmap.N) for i in range(n)]


def correlation_bars(
    entries: Mapping[str, Mapping[str, MetricEntry | None]],
    columns: Sequence[str],
    path: Path,
    title: str,
    ylabel: str = "Spearman ρ",
) -> Path:
    """Grouped bars: one group per column (language, avg, Combined), one bar per judge.

    ``entries[judge][column]`` is a result entry (``value``, ``ci``) or None."""
    plt = _pyplot()
    judges = list(entries)
    n_j, n_c = max(len(judges), 1), max(len(columns), 1)
    width = 0.8 / n_j
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * n_c * max(1.0, n_j / 2.5) + 2), 4.2))
    x = np.arange(len(columns))
    lows: list[float] = [0.0]
    for j, (judge, color) in enumerate(zip(judges, _colors(len(judges)), strict=True)):
        vals, err_lo, err_hi = [], [], []
        for c in columns:
            e = entries[judge].get(c) or MetricEntry()
            v = _fnum(e.value)
            ci = e.ci or [None, None]
            lo, hi = _fnum(ci[0]), _fnum(ci[1])
            vals.append(v)
            err_lo.append(v - lo if not (math.isnan(v) or math.isnan(lo)) else 0.0)
            err_hi.append(hi - v if not (math.isnan(v) or math.isnan(hi)) else 0.0)
            lows += [z for z in (v, lo) if not math.isnan(z)]
        pos = x - 0.4 + width * (j + 0.5)
        ax.bar(pos, np.nan_to_num(vals), width, color=color, label=judge, edgecolor="white", linewidth=0.5)
        ax.errorbar(
            pos,
            np.nan_to_num(vals),
            yerr=[err_lo, err_hi],
            fmt="none",
            ecolor="black",
            elinewidth=0.8,
            capsize=2,
        )
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(x, list(columns), rotation=30 if n_c > 8 else 0)
    ax.set_ylim(min(-0.05, min(lows) - 0.05), 1.0)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return _save(fig, path)


def issue_f1_bars(table: pd.DataFrame, labels: Mapping[str, str], path: Path, title: str) -> Path:
    """Two panels (F1+ on top, F1- below): bars per dimension per judge, the human ceiling as a
    black line across each dimension's group.

    ``table`` has columns judge, dimension, f1_pos, f1_neg, human_f1_pos, human_f1_neg."""
    plt = _pyplot()
    dims = list(dict.fromkeys(table["dimension"]))
    judges = list(dict.fromkeys(table["judge"]))
    width = 0.8 / max(len(judges), 1)
    x = np.arange(len(dims))
    fig, axes = plt.subplots(2, 1, figsize=(max(7.0, 1.0 * len(dims) + 3), 6.8), sharex=True)
    for ax, key, name in ((axes[0], "f1_pos", "F1+ (issue)"), (axes[1], "f1_neg", "F1- (no issue)")):
        for j, (judge, color) in enumerate(zip(judges, _colors(len(judges)), strict=True)):
            sub = table[table["judge"] == judge].set_index("dimension")
            vals = [_fnum(sub[key].get(d)) if d in sub.index else math.nan for d in dims]
            ax.bar(
                x - 0.4 + width * (j + 0.5),
                np.nan_to_num(vals),
                width,
                color=color,
                label=judge,
                edgecolor="white",
                linewidth=0.5,
            )
        human = table.groupby("dimension", sort=False)[f"human_{key}"].first()
        drawn = False
        for i, d in enumerate(dims):
            h = _fnum(human.get(d))
            if not math.isnan(h):
                ax.hlines(
                    h,
                    i - 0.45,
                    i + 0.45,
                    colors="black",
                    linewidth=2.2,
                    label=None if drawn else "human ceiling",
                )
                drawn = True
        ax.set_ylim(0, 1.05)
        ax.set_ylabel(name)
        ax.grid(axis="y", alpha=0.3)
    axes[1].set_xticks(x, [labels.get(d, d) for d in dims], rotation=30 if len(dims) > 8 else 0)
    axes[0].set_title(title)
    axes[0].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return _save(fig, path)


def _annotated(ax, data: pd.DataFrame, cmap: str, vmin: float, vmax: float, fmt: str) -> Any:
    arr = data.to_numpy(dtype=float)
    masked = np.ma.masked_invalid(arr)
    plt = _pyplot()
    cm = plt.get_cmap(cmap).with_extremes(bad="#e0e0e0")
    im = ax.imshow(masked, cmap=cm, vmin=vmin, vmax=vmax, aspect="auto")
    span = (vmax - vmin) or 1.0
    for (r, c), v in np.ndenumerate(arr):
        if math.isnan(v):
            ax.text(c, r, "—", ha="center", va="center", fontsize=8, color="#555555")
            continue
        dark = (v - vmin) / span > 0.6
        ax.text(
            c, r, format(v, fmt), ha="center", va="center", fontsize=8, color="white" if dark else "black"
        )
    ax.set_yticks(range(len(data.index)), [str(i) for i in data.index])
    ax.set_xticks(
        range(len(data.columns)),
        [str(c) for c in data.columns],
        rotation=30 if len(data.columns) > 6 else 0,
        ha="right" if len(data.columns) > 6 else "center",
    )
    return im


def rate_heatmap(
    rates: pd.DataFrame,
    path: Path,
    title: str,
    overall: pd.Series | None = None,
    xlabel: str = "",
    ylabel: str = "chatbot",
) -> Path:
    """Annotated heatmap of percentages (0–100, NaN shown as "—"); with ``overall`` (mean overall
    score per row) a narrow second heatmap on its own colour scale, as in MEDAL Fig. 2."""
    plt = _pyplot()
    n_r, n_c = rates.shape
    extra = overall is not None and not overall.dropna().empty
    ratios = [max(n_c, 1), 1] if extra else [1]
    fig, axes = plt.subplots(
        1,
        len(ratios),
        figsize=(0.75 * n_c + (2.6 if extra else 1.6) + 2.2, 0.45 * n_r + 1.8),
        gridspec_kw={"width_ratios": ratios},
        squeeze=False,
    )
    ax = axes[0][0]
    finite = rates.to_numpy(dtype=float)
    vmax = float(np.nanmax(finite)) if np.isfinite(finite).any() else 1.0
    im = _annotated(ax, rates, "Reds", 0.0, max(vmax, 1.0), ".1f")
    fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02, label="% of dialogues")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if extra and overall is not None:  # extra: overall has values
        ov = overall.reindex(rates.index).to_frame("overall")
        lo, hi = float(np.nanmin(ov.to_numpy())), float(np.nanmax(ov.to_numpy()))
        _annotated(axes[0][1], ov, "Greens", min(lo, hi - 1e-9) - 0.5, hi + 0.1, ".2f")
        axes[0][1].set_yticks([])
        axes[0][1].set_title("mean overall", fontsize=9)
    return _save(fig, path)


# -- tables from samples.parquet ------------------------------------------------------------------
def _loads(x: Any) -> dict[str, Any] | None:
    if isinstance(x, dict):
        return x
    if not isinstance(x, str) or not x:
        return None
    try:
        v = json.loads(x)
    except json.JSONDecodeError:
        return None
    return v if isinstance(v, dict) else None


def _flag(v: Any) -> float:
    n = float(v) if isinstance(v, bool) else _fnum(v)
    return n if math.isnan(n) else float(n >= 0.5)


def label_frame(samples: pd.DataFrame, dims: list[str], source: str = "judge") -> tuple[pd.DataFrame, int]:
    """Long frame (row, system, language, annotator, dimension, value ∈ {0, 1, NaN}) of the judge's
    (``judge_labels``; the judge is one "annotator") or the humans' (``human_labels``) issue labels,
    and the number of rows left out (judge: parse failures or no labels; human: no labels)."""
    col = {"judge": "judge_labels", "human": "human_labels"}[source]
    out: list[tuple] = []
    excluded = 0
    if col not in samples.columns:
        return pd.DataFrame(columns=["row", "system", "language", "annotator", "dimension", "value"]), len(
            samples
        )
    status = (
        samples["parse_status"] if "parse_status" in samples.columns else pd.Series("ok", index=samples.index)
    )
    systems = samples["system"] if "system" in samples.columns else pd.Series(None, index=samples.index)
    for i, (lab, st, sysname, lang) in enumerate(
        zip(samples[col], status, systems, samples["language"], strict=True)
    ):
        labels = _loads(lab)
        if labels is None or (source == "judge" and st != "ok"):
            excluded += 1
            continue
        sysname = sysname if isinstance(sysname, str) and sysname else "(unknown)"
        for d in dims:
            v = labels.get(d)
            per = v if source == "human" and isinstance(v, dict) else {"judge": v}
            for ann, x in per.items():
                out.append((i, sysname, lang, str(ann), d, _flag(x)))
    return pd.DataFrame(
        out, columns=["row", "system", "language", "annotator", "dimension", "value"]
    ), excluded


def _mean_over_annotators(df: pd.DataFrame, keys: list[str], value: str) -> pd.Series:
    per_ann = df.groupby(keys + ["annotator"], sort=False)[value].mean()
    return per_ann.groupby(level=list(range(len(keys))), sort=False).mean() * 100


def issue_rate_table(
    samples: pd.DataFrame,
    dims: list[str],
    index: str = "system",
    columns: str = "language",
    source: str = "judge",
) -> pd.DataFrame:
    """% of dialogues with ≥1 of ``dims`` flagged, ``index`` × ``columns`` plus an "all" column.

    Per annotator (the judge is one), a dialogue counts when it has at least one non-null label;
    each cell is the mean over annotators of the per-annotator rate."""
    long, _ = label_frame(samples, dims, source)
    long = long.dropna(subset=["value"])
    if long.empty:
        return pd.DataFrame()
    anyf = (
        long.groupby(["row", "annotator"], sort=False)
        .agg(system=("system", "first"), language=("language", "first"), value=("value", "max"))
        .reset_index()
    )
    table = _mean_over_annotators(anyf, [index, columns], "value").unstack(columns)
    col_order = [c for c in dict.fromkeys(long[columns]) if c in table.columns]
    table = table.reindex(columns=col_order)
    table["all"] = _mean_over_annotators(anyf, [index], "value")
    return table.sort_index()


def issue_dimension_table(
    samples: pd.DataFrame, dims: list[str], index: str = "system", source: str = "judge"
) -> pd.DataFrame:
    """% of dialogues with each issue flagged (non-null labels only), ``index`` × dimension; the
    mean over annotators of the per-annotator rate."""
    long, _ = label_frame(samples, dims, source)
    long = long.dropna(subset=["value"])
    if long.empty:
        return pd.DataFrame()
    table = _mean_over_annotators(long, [index, "dimension"], "value").unstack("dimension")
    table = table.reindex(columns=[d for d in dims if d in table.columns])
    return table.reindex(list(dict.fromkeys(long[index]))) if index == "language" else table.sort_index()


def overall_score_table(samples: pd.DataFrame, index: str = "system", source: str = "judge") -> pd.Series:
    """Mean overall score per ``index``: the judge's ``score`` (parse failures excluded) or the
    ``human_rating``."""
    df = samples.copy()
    if index not in df.columns:
        return pd.Series(dtype=float)
    df[index] = df[index].where(df[index].notna(), "(unknown)")
    if source == "judge":
        if "parse_status" in df.columns:
            df = df[df["parse_status"] == "ok"]
        vals = pd.to_numeric(df["score"], errors="coerce")
    else:
        vals = pd.to_numeric(df.get("human_rating"), errors="coerce")
    return vals.groupby(df[index]).mean().sort_index()


class Doc:
    """The report as a list of blocks, rendered to Markdown (figures by relative path) and to a
    self-contained HTML page (figures as base64 data URIs, tables as escaped HTML tables)."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.blocks: list[tuple] = []

    def h(self, level: int, text: str) -> None:
        self.blocks.append(("h", level, text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def bullets(self, items: Sequence[str]) -> None:
        self.blocks.append(("ul", list(items)))

    def table(
        self, headers: Sequence[str], rows: Sequence[Sequence[Any]], bold_rows: Sequence[int] = ()
    ) -> None:
        self.blocks.append(
            ("table", [str(h) for h in headers], [[str(c) for c in r] for r in rows], set(bold_rows))
        )

    def figure(self, rel_path: str, caption: str) -> None:
        self.blocks.append(("fig", rel_path, caption))

    def to_markdown(self) -> str:
        out = [f"# {self.title}", ""]
        for b in self.blocks:
            if b[0] == "h":
                out += ["#" * b[1] + " " + b[2], ""]
            elif b[0] == "p":
                out += [b[1], ""]
            elif b[0] == "ul":
                out += [f"- {x}" for x in b[1]] + [""]
            elif b[0] == "table":
                _, headers, rows, bold = b

                def cell(x: str, strong: bool) -> str:
                    x = x.replace("|", "\\|").replace("\n", " ")
                    return f"**{x}**" if strong and x not in ("", "—") else x

                out.append("| " + " | ".join(cell(h, False) for h in headers) + " |")
                out.append("|" + "|".join("---" for _ in headers) + "|")
                out += ["| " + " | ".join(cell(c, i in bold) for c in r) + " |" for i, r in enumerate(rows)]
                out.append("")
            elif b[0] == "fig":
                out += [f"![{b[2]}]({b[1]})", "", f"*{b[2]}*", ""]
        return "\n".join(out).rstrip() + "\n"

    def to_html(self, root: Path) -> str:
        import base64
        from html import escape

        body = [f"<h1>{escape(self.title)}</h1>"]
        for b in self.blocks:
            if b[0] == "h":
                body.append(f"<h{b[1]}>{escape(b[2])}</h{b[1]}>")
            elif b[0] == "p":
                body.append(f"<p>{escape(b[1])}</p>")
            elif b[0] == "ul":
                body.append("<ul>" + "".join(f"<li>{escape(x)}</li>" for x in b[1]) + "</ul>")
            elif b[0] == "table":
                _, headers, rows, bold = b
                head = "".join(f"<th>{escape(h)}</th>" for h in headers)
                trs = "".join(
                    ('<tr class="best">' if i in bold else "<tr>")
                    + "".join(f"<td{_cell_class(c)}>{_cell_html(c)}</td>" for c in r)
                    + "</tr>"
                    for i, r in enumerate(rows)
                )
                # a wide table scrolls in its own box instead of pushing the page wider
                body.append(
                    f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>{trs}</tbody></table></div>'
                )
            elif b[0] == "fig":
                data = base64.b64encode((root / b[1]).read_bytes()).decode("ascii")
                body.append(
                    f'<figure><img alt="{escape(b[2])}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{escape(b[2])}</figcaption></figure>"
                )
        return _HTML.format(title=escape(self.title), body="\n".join(body))


_ENTRY = re.compile(r"^(\S+) (\[[^\]]*\])$")


def _cell_html(text: str) -> str:
    """A cell's escaped text; ``0.532* [0.41, 0.63]`` may break before its CI, never inside it."""
    from html import escape

    m = _ENTRY.match(text)
    if not m:
        return escape(text)
    return f'{escape(m.group(1))} <span class="ci">{escape(m.group(2))}</span>'


def _cell_class(text: str) -> str:
    """Long words (judge specs, paths) may break anywhere; numbers and short labels stay on one line."""
    return ' class="t"' if len(text) > 24 and re.search(r"[A-Za-z]", text) else ""


_HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }}
.table-wrap {{ overflow-x: auto; max-width: 100%; margin: 0.8em 0 1.6em; }}
table {{ border-collapse: collapse; font-size: 0.9em; }}
th, td {{ border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; white-space: nowrap; }}
td:has(.ci) {{ white-space: normal; }} .ci {{ white-space: nowrap; color: #555; }}
td.t {{ white-space: normal; overflow-wrap: anywhere; min-width: 10em; max-width: 28em; text-align: left; }}
th {{ white-space: normal; }}
th {{ background: #f3f3f3; }} td:first-child, th:first-child {{ text-align: left; }}
tr.best td {{ font-weight: bold; background: #fff8dc; }}
img {{ max-width: 100%; }} figcaption {{ font-style: italic; color: #555; }}
</style></head><body>
{body}
</body></html>
"""
