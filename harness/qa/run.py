"""``harness datasets qa``: translation QA of a registered (or built) dataset with parallel languages.

Runs the methods of :mod:`harness.qa.scores` that were asked for on the sampled parallel segments
(:mod:`harness.qa.segments`), flags outliers, and writes

* ``<output>/qa.json`` — the Table 2-style per-language table (and per config), the settings, what
  ran and what was skipped, flag counts; ``<output>/segments.parquet`` — one row per scored segment;
* a **new dataset version** (``NAME@<next minor>``, or ``--dataset-output DIR``) with two columns on
  every row — ``qa_flagged`` (bool; null = not checked) and ``translation_qa`` (JSON: checked segments,
  the lowest score per method, the flag reasons) — and a "Translation QA" section in its card. The
  checked version is never altered (registry versions are immutable).

Flags (per segment; an item is flagged when any of its segments is):

* ``low_similarity`` / ``low_backtranslation`` (sentence chrF) / ``low_cometkiwi``: below the lower
  Tukey fence ``Q1 - 1.5 IQR`` of that language's scores (:func:`scipy.stats.iqr`);
* ``low_adequacy``: an adequacy of 2 or less on the 1-5 scale (Table 6: 1 = poor ... 5 = perfect); a
  judge on another scale (e.g. ``embed:``) is flagged by the Tukey fence instead;
* ``untranslated``: the translation equals the source (case-insensitive) and the source has 3 or more
  words; ``empty_translation``: an empty translation of a non-empty source;
* ``segment_count_mismatch`` (per row, on every item, sampled or not): the translation has another
  number of utterances than the source.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from harness.cache import RequestCache, default_cache_path
from harness.jsontypes import JSON
from harness.qa.records import AverageQA, LanguageQA, Misaligned, QADocument, RowQA
from harness.qa.scores import (
    COMET_DEFAULT,
    adequacy,
    back_translate,
    backtranslation_scores,
    cometkiwi,
    similarity,
)
from harness.qa.segments import Segment, parallel_segments, sample_segments

DEFAULT_ENCODER = "embed:multilingual-e5-small"
QA_FILE = "qa.json"
SEGMENTS_FILE = "segments.parquet"
#: ``translation_qa``'s key of the lowest score per method column
_MIN_KEYS: dict[
    str, Literal["adequacy_min", "similarity_min", "chrf_min", "bertscore_f1_min", "cometkiwi_min"]
] = {
    "adequacy": "adequacy_min",
    "similarity": "similarity_min",
    "chrf": "chrf_min",
    "bertscore_f1": "bertscore_f1_min",
    "cometkiwi": "cometkiwi_min",
}
METHOD_COLUMNS = {"similarity": "low_similarity", "chrf": "low_backtranslation", "cometkiwi": "low_cometkiwi"}


@dataclass
class QAConfig:
    ref: str  # NAME@X.Y.Z (registry) or a built dataset directory
    judge: str | None = None  # adequacy judge (Table 6 prompt for LLM judges)
    encoder: str | None = DEFAULT_ENCODER  # cross-lingual similarity; None = skip
    encoder_explicit: bool = False  # a default encoder that cannot load is skipped with a warning
    translator: str | None = None
    bt_column: str | None = None
    comet: bool = False
    comet_model: str = COMET_DEFAULT
    comet_gpus: int = 0
    sample: int = 100  # source utterances per config (xDial-Eval §3.2); 0 = all
    seed: int = 0
    source_language: str = "en"
    configs: list[str] | None = None
    languages: list[str] | None = None
    batch_size: int = 32
    output_dir: Path | None = None
    register: bool = True
    version: str | None = None
    dataset_output: Path | None = None
    registry: Path | None = None
    cache_path: Path | None = None
    use_cache: bool = True
    bertscore_model: str | None = None
    show_progress: bool = True


@dataclass
class QAResult:
    qa: QADocument
    segments: pd.DataFrame
    output_dir: Path
    new_version: str | None
    warnings: list[str] = field(default_factory=list)


def _progress(show: bool):
    from contextlib import nullcontext

    if not show:
        return nullcontext(None)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
    )


def _resolve(cfg: QAConfig) -> tuple[Path, str | None, str | None]:
    """(dataset directory, registry name, version) of ``cfg.ref``."""
    p = Path(cfg.ref)
    if p.is_dir():
        return p, None, None
    from harness.data.registry import DatasetRegistry

    rv = DatasetRegistry(cfg.registry).resolve(cfg.ref)
    return rv.path, rv.name, rv.version


def _fence(x: np.ndarray) -> float:
    return float(np.percentile(x, 25) - 1.5 * stats.iqr(x))


def flag_segments(frame: pd.DataFrame, adequacy_scale: tuple[float, float] | None) -> pd.Series:
    """The flag reasons of every segment row (a list per row)."""
    reasons: list[list[str]] = [[] for _ in range(len(frame))]
    pos = {idx: k for k, idx in enumerate(frame.index)}
    for col, reason in [*METHOD_COLUMNS.items(), ("adequacy", "low_adequacy")]:
        if col not in frame:
            continue
        for _, sub in frame.groupby("language"):
            vals = pd.to_numeric(sub[col], errors="coerce").dropna()
            if len(vals) < 4:
                continue
            if col == "adequacy" and adequacy_scale == (1.0, 5.0):
                low = vals[vals <= 2]
            else:
                low = vals[vals < _fence(vals.to_numpy(float))]
            for idx in low.index:
                reasons[pos[idx]].append(reason)
    for k, (s, t) in enumerate(zip(frame["source"], frame["target"], strict=True)):
        if s.strip() and not t.strip():
            reasons[k].append("empty_translation")
        elif s.strip().casefold() == t.strip().casefold() and len(s.split()) >= 3:
            reasons[k].append("untranslated")
    return pd.Series(reasons, index=frame.index)


def _mean(x: object) -> float | None:
    v = pd.to_numeric(pd.Series(x), errors="coerce").dropna()
    return float(v.mean()) if len(v) else None


def language_table(
    frame: pd.DataFrame, corpus: dict[str, dict[str, float]], misaligned: list[Misaligned]
) -> dict[str, LanguageQA]:
    out: dict[str, LanguageQA] = {}
    for lang, sub in frame.groupby("language", sort=False):
        flagged = sub[sub["reasons"].map(bool)]
        row: LanguageQA = {
            "n_segments": int(len(sub)),
            "n_items": int(sub[["config", "item_id"]].drop_duplicates().shape[0]),
            "bleu": (corpus.get(lang) or {}).get("bleu"),
            "chrf": (corpus.get(lang) or {}).get("chrf"),
            "bertscore_f1": _mean(sub.get("bertscore_f1")),
            "adequacy": _mean(sub.get("adequacy")),
            "adequacy_failures": int(sub["adequacy"].isna().sum()) if "adequacy" in sub else None,
            "cometkiwi": _mean(sub.get("cometkiwi")),
            "similarity": _mean(sub.get("similarity")),
            "flagged_segments": int(len(flagged)),
            "flagged_items": int(flagged[["config", "item_id"]].drop_duplicates().shape[0]),
            "misaligned_items": sum(1 for m in misaligned if m["language"] == lang),
        }
        out[str(lang)] = row
    return out


def _average(table: dict[str, LanguageQA]) -> AverageQA:
    rows = table.values()
    return {
        "bleu": _mean([r["bleu"] for r in rows]),
        "chrf": _mean([r["chrf"] for r in rows]),
        "bertscore_f1": _mean([r["bertscore_f1"] for r in rows]),
        "adequacy": _mean([r["adequacy"] for r in rows]),
        "cometkiwi": _mean([r["cometkiwi"] for r in rows]),
        "similarity": _mean([r["similarity"] for r in rows]),
        "n_segments": int(sum(r["n_segments"] or 0 for r in rows)),
        "flagged_segments": int(sum(r["flagged_segments"] or 0 for r in rows)),
        "flagged_items": int(sum(r["flagged_items"] or 0 for r in rows)),
        "misaligned_items": int(sum(r["misaligned_items"] or 0 for r in rows)),
    }


def _scale(value: JSON) -> tuple[float, float] | None:
    """A judge's (lo, hi) score range as its provenance records it (a JSON list), or None."""
    if isinstance(value, list) and len(value) == 2:
        lo, hi = value
        if isinstance(lo, int | float) and isinstance(hi, int | float):
            return (float(lo), float(hi))
    return None


def run_qa(cfg: QAConfig) -> QAResult:
    from datasets import load_dataset

    from harness.data.layout import card_configs

    path, reg_name, reg_version = _resolve(cfg)
    configs = card_configs(path)
    unknown = [c for c in cfg.configs or [] if c not in configs]
    if unknown:
        raise ValueError(f"{path}: no config(s) {unknown}; it has {configs}")
    segments: list[Segment] = []
    misaligned: list[Misaligned] = []
    for config in cfg.configs or configs:
        rows = load_dataset(str(path), config, split="test").to_list()
        if cfg.bt_column and rows and cfg.bt_column not in rows[0]:
            raise ValueError(
                f"{path} config {config!r}: no back-translation column {cfg.bt_column!r} (columns: {sorted(rows[0])})"
            )
        segs, bad = parallel_segments(rows, config, cfg.source_language, cfg.languages, cfg.bt_column)
        segments += segs
        misaligned += [{**m, "config": config} for m in bad]
    if not segments:
        raise ValueError(
            f"{cfg.ref}: no parallel segments — QA needs rows sharing item_id in {cfg.source_language!r} and at least one "
            "other language (a translated benchmark such as xdial-eval)"
        )
    segs = sample_segments(segments, cfg.sample, cfg.seed)
    frame = pd.DataFrame([asdict(s) for s in segs])
    warnings: list[str] = []
    methods: dict[str, Mapping[str, object] | str] = {}
    cache = RequestCache(cfg.cache_path or default_cache_path(), enabled=cfg.use_cache)
    adequacy_scale = None
    corpus: dict[str, dict[str, float]] = {}
    try:
        with _progress(cfg.show_progress) as prog:

            def bar(name: str):
                if prog is None:
                    return None
                t = prog.add_task(name, total=len(segs))
                return lambda n: prog.advance(t, n)

            if cfg.judge:
                scores, info = adequacy(
                    cfg.judge,
                    segs,
                    cache,
                    source_language=cfg.source_language,
                    batch_size=cfg.batch_size,
                    seed=cfg.seed,
                    progress=bar("adequacy"),
                )
                frame["adequacy"] = scores
                adequacy_scale = _scale(info.get("scale"))
                methods["adequacy"] = {**info, "failures": int(sum(s is None for s in scores))}
            else:
                methods["adequacy"] = "skipped: no --judge"
            bts: list[str] | None = None
            if cfg.translator:
                bts, info = back_translate(
                    cfg.translator,
                    segs,
                    cache,
                    source_language=cfg.source_language,
                    progress=bar("back-translation"),
                    batch_size=cfg.batch_size,
                )
                methods["back_translation"] = info
            elif cfg.bt_column:
                bts = [s.back_translation or "" for s in segs]
                methods["back_translation"] = {"column": cfg.bt_column}
            if bts is not None:
                frame["back_translation"] = bts
                per_seg, corpus, info = backtranslation_scores(
                    frame["source"].tolist(),
                    bts,
                    frame["language"].tolist(),
                    bertscore_model=cfg.bertscore_model,
                    show_progress=cfg.show_progress,
                )
                frame["chrf"], frame["bertscore_f1"] = per_seg["chrf"], per_seg["bertscore_f1"]
                methods["back_translation_scores"] = info
            else:
                methods["back_translation"] = "skipped: no --translator and no --bt-column"
            if cfg.comet:
                frame["cometkiwi"], methods["cometkiwi"] = cometkiwi(
                    segs,
                    model=cfg.comet_model,
                    batch_size=cfg.batch_size,
                    gpus=cfg.comet_gpus,
                    show_progress=cfg.show_progress,
                )
            else:
                methods["cometkiwi"] = "skipped: pass --comet (optional extra [comet])"
            if cfg.encoder:
                try:
                    frame["similarity"], methods["similarity"] = similarity(
                        cfg.encoder, segs, cache, progress=bar("similarity")
                    )
                except (ValueError, OSError, FileNotFoundError, KeyError) as e:
                    if cfg.encoder_explicit:
                        raise
                    warnings.append(
                        f"similarity skipped: the default encoder {cfg.encoder} could not be loaded ({e}); pass --encoder"
                    )
                    methods["similarity"] = f"skipped: {cfg.encoder} unavailable"
            else:
                methods["similarity"] = "skipped: --encoder none"
    finally:
        cache.close()
    frame["reasons"] = flag_segments(frame, adequacy_scale)
    table = language_table(frame, corpus, misaligned)
    per_config = {
        c: language_table(frame[frame["config"] == c], {}, [m for m in misaligned if m["config"] == c])
        for c in frame["config"].unique()
    }
    counts: dict[str, int] = {}
    for rs in frame["reasons"]:
        for r in rs:
            counts[r] = counts.get(r, 0) + 1
    counts["segment_count_mismatch"] = len(misaligned)
    qa: QADocument = {
        "kind": "translation_qa",
        "schema_version": "1.0",
        "dataset": {
            "ref": f"{reg_name}@{reg_version}" if reg_name else str(path),
            "path": str(path),
            "fingerprint": _manifest(path).get("fingerprint"),
        },
        "source_language": cfg.source_language,
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()},
        "languages": table,
        "average": _average(table),
        "per_config": per_config,
        "flags": counts,
        "methods": methods,
        "misaligned": misaligned[:200],
        "warnings": warnings,
        "outlier_rule": "Tukey lower fence Q1 - 1.5 IQR per language; adequacy <= 2 on 1-5",
    }
    out_dir = Path(cfg.output_dir or Path("runs") / f"qa-{(reg_name or path.name)}-{reg_version or 'dir'}")
    out_dir.mkdir(parents=True, exist_ok=True)
    rollup = item_rollup(frame, misaligned)
    new_version = None
    if cfg.register or cfg.dataset_output:
        new_version = write_version(cfg, path, reg_name, configs, rollup, qa)
        qa["new_version"] = new_version
    (out_dir / QA_FILE).write_text(json.dumps(_finite(qa), indent=2, ensure_ascii=False), encoding="utf-8")
    frame.assign(reasons=frame["reasons"].map(json.dumps)).to_parquet(out_dir / SEGMENTS_FILE, index=False)
    return QAResult(qa, frame, out_dir, new_version, warnings)


def _finite(o: object) -> object:
    if isinstance(o, dict):
        return {str(k): _finite(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_finite(v) for v in o]
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return o


def _manifest(path: Path) -> dict[str, object]:
    from harness.data.layout import MANIFEST_NAME

    f = path / MANIFEST_NAME
    return json.loads(f.read_text(encoding="utf-8")) if f.is_file() else {}


def item_rollup(frame: pd.DataFrame, misaligned: list[Misaligned]) -> dict[tuple[str, str], RowQA]:
    """(config, row id) -> the row's ``translation_qa`` record."""
    out: dict[tuple[str, str], RowQA] = {}
    for (config, row_id), sub in frame.groupby(["config", "row_id"], sort=False):
        rec: RowQA = {
            "checked_segments": int(len(sub)),
            "reasons": sorted({r for rs in sub["reasons"] for r in rs}),
        }
        for col in ("adequacy", "similarity", "chrf", "bertscore_f1", "cometkiwi"):
            if col in sub:
                rec[_MIN_KEYS[col]] = _mean([pd.to_numeric(sub[col], errors="coerce").min()])
        out[(str(config), str(row_id))] = rec
    for m in misaligned:
        rec = out.setdefault((m.get("config", ""), str(m["row_id"])), {"checked_segments": 0, "reasons": []})
        rec["reasons"] = sorted({*rec["reasons"], "segment_count_mismatch"})
    return out


def write_version(
    cfg: QAConfig,
    path: Path,
    reg_name: str | None,
    configs: list[str],
    rollup: dict[tuple[str, str], RowQA],
    qa: QADocument,
) -> str:
    """Copy the dataset with the ``qa_flagged`` / ``translation_qa`` columns and a QA card section:
    into the registry as a new version, or into ``cfg.dataset_output``."""
    from harness.data.registry import DatasetRegistry

    def write(staging: Path, release: Mapping[str, object] | None) -> None:
        _write_flagged_copy(path, staging, configs, rollup, qa, release)

    if cfg.dataset_output is not None:
        if Path(cfg.dataset_output).exists():
            raise FileExistsError(f"--dataset-output {cfg.dataset_output} exists; give a new directory")
        write(Path(cfg.dataset_output), None)
        return str(cfg.dataset_output)
    if reg_name is None:
        raise ValueError(
            f"{path} is not a registered version: pass --dataset-output DIR for the flagged copy, or --no-register"
        )
    reg = DatasetRegistry(cfg.registry)
    version = cfg.version or reg.next_version(reg_name, "minor")
    return reg.register(reg_name, version, write).ref


def _write_flagged_copy(
    src: Path,
    dest: Path,
    configs: list[str],
    rollup: dict[tuple[str, str], RowQA],
    qa: QADocument,
    release: Mapping[str, object] | None,
) -> None:
    import hashlib

    import pyarrow as pa
    import pyarrow.parquet as pq
    import yaml

    from harness.data.layout import CARD_NAME, MANIFEST_NAME, data_file
    from harness.provenance import utc_now

    dest.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    for config in configs:
        table = pq.read_table(src / data_file(config))
        recs = [rollup.get((config, str(rid))) for rid in table.column("id").to_pylist()]
        flagged = pa.array([None if r is None else bool(r["reasons"]) for r in recs], type=pa.bool_())
        detail = pa.array(
            [None if r is None else json.dumps(r, ensure_ascii=False) for r in recs], type=pa.string()
        )
        table = table.append_column("qa_flagged", flagged).append_column("translation_qa", detail)
        (dest / config).mkdir(parents=True, exist_ok=True)
        pq.write_table(table, dest / data_file(config))
        h.update(hashlib.sha256((dest / data_file(config)).read_bytes()).digest())
    text = (src / CARD_NAME).read_text(encoding="utf-8")
    _, front, body = text.split("---", 2)
    meta = yaml.safe_load(front) or {}
    for info in meta.get("dataset_info") or []:
        info.setdefault("features", []).extend(
            [{"name": "qa_flagged", "dtype": "bool"}, {"name": "translation_qa", "dtype": "string"}]
        )
    card = (
        "---\n"
        + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True)
        + "---"
        + body.rstrip()
        + "\n\n"
        + qa_card_section(qa)
    )
    (dest / CARD_NAME).write_text(card, encoding="utf-8")
    man = _manifest(src)
    man.update(
        {
            "fingerprint": h.hexdigest(),
            "created_at": utc_now(),
            "derived_from": {"ref": qa["dataset"]["ref"], "fingerprint": qa["dataset"]["fingerprint"]},
            "translation_qa": {k: qa[k] for k in ("languages", "average", "flags", "outlier_rule")},
        }
    )
    if release is not None:
        man["release"] = release
    else:
        man.pop("release", None)
    (dest / MANIFEST_NAME).write_text(
        json.dumps(_finite(man), indent=2, ensure_ascii=False), encoding="utf-8"
    )
    for extra in src.iterdir():  # anything else the version carries (e.g. paper tables), unchanged
        if (
            extra.is_file()
            and extra.name not in (CARD_NAME, MANIFEST_NAME)
            and not (dest / extra.name).exists()
        ):
            shutil.copy2(extra, dest / extra.name)


def qa_card_section(qa: QADocument) -> str:
    """The "Translation QA" section of the new version's card."""
    from harness.report.meta import QA_HEADERS, qa_rows

    lines = [
        "## Translation QA (xDial-Eval §3.2, Table 2)",
        "",
        f"Checked version: `{qa['dataset']['ref']}` (fingerprint `{str(qa['dataset']['fingerprint'])[:16]}`), "
        f"source language `{qa['source_language']}`, {qa['settings']['sample'] or 'all'} sampled source utterances per "
        "config (seeded). Per row: `qa_flagged` (null = not checked) and `translation_qa` (JSON: checked segments, the "
        "lowest score per method, flag reasons).",
        "",
        "| " + " | ".join(QA_HEADERS) + " |",
        "|" + "---|" * len(QA_HEADERS),
    ]
    lines += ["| " + " | ".join(r) + " |" for r in qa_rows(qa)]
    lines += [
        "",
        f"Outliers: {qa['outlier_rule']}. Flag counts: "
        + ", ".join(f"{k} {v}" for k, v in sorted(qa["flags"].items()))
        + ".",
        "",
    ]
    for k, v in qa["methods"].items():
        lines.append(
            f"- {k}: {v if isinstance(v, str) else json.dumps({x: v[x] for x in v if x != 'identity'}, default=str)[:300]}"
        )
    return "\n".join(lines) + "\n"
