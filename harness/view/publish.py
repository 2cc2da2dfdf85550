"""``harness runs publish RUN --repo org/name``: a run directory as a Hub dataset, the way
``harness datasets publish`` pushes a dataset version (:func:`harness.data.hub.publish_dataset`: one
commit, tag ``vX.Y.Z``, token from ``$HF_TOKEN`` only).

The repo holds the run directory itself plus a dataset card, so a download of it is again a run
directory (``harness view hub:org/name@v1.0.0`` reads it back)::

    README.md         card: YAML ``configs`` (``samples``, and ``items`` with transcripts) and the results table
    results.json      as written by ``harness run``
    samples.parquet   config ``samples``: load_dataset("org/name", "samples", split="test")
    items.parquet     config ``items`` (only with ``--with-transcripts``): the dialogues the samples rate
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from harness.data.hub import PublishResult, publish_dataset
from harness.meta.metric import MetricEntry, find
from harness.report.figures import dataset_label, fmt_entry
from harness.run.results import RESULTS_FILE, SAMPLES_FILE
from harness.view.data import ITEMS_FILE, Payload, RunFiles, read_run
from harness.view.items import COLUMNS, Transcripts


def results_markdown(run: RunFiles) -> str:
    """One Markdown table per task: languages × metrics (value, * p < 0.05, 95% CI), parse failures."""
    out = []
    doc = run.document
    for task, by_lang in doc.results.items():
        columns = doc.table_metrics(task)
        if not columns:
            continue
        keys = [m.key() for m in columns]
        headers = [m.header() for m in columns]
        out += [f"### {task}", "", "| language | n | " + " | ".join(headers) + " | parse failures |"]
        out.append("|---|---:|" + "---:|" * len(keys) + "---:|")
        for lang, entries in by_lang.items():
            first = find(entries, keys[0]) or MetricEntry()
            cells = [fmt_entry(find(entries, k)) for k in keys]
            name = "**all** (mean)" if lang == "all" else lang
            n = "—" if first.n is None else first.n
            failures = "—" if first.parse_failures is None else first.parse_failures
            out.append(f"| {name} | {n} | " + " | ".join(cells) + f" | {failures} |")
        out.append("")
    return "\n".join(out)


def card(run: RunFiles, repo_id: str, version: str, with_items: bool) -> str:
    res = run.results
    h = res.get("harness") or {}
    datasets = "; ".join(dict.fromkeys(dataset_label(d, t) for t, d in (res.get("datasets") or {}).items()))
    configs = [
        "configs:",
        "- config_name: samples",
        "  default: true",
        "  data_files:",
        "  - split: test",
        f"    path: {SAMPLES_FILE}",
    ]
    if with_items:
        configs += ["- config_name: items", "  data_files:", "  - split: test", f"    path: {ITEMS_FILE}"]
    tasks = ", ".join(run.tasks)
    lines = [
        "---",
        *configs,
        "tags:",
        "- dialeval-harness",
        "- llm-as-a-judge",
        "- meta-evaluation",
        "---",
        f"# {run.run_id}: `{run.judge}` on {tasks}",
        "",
        "A meta-evaluation run of [dialeval-harness](https://github.com/) — how well a judge agrees with human "
        "ratings, per dataset and language.",
        "",
        f"- **judge**: `{run.judge}`",
        f"- **dataset**: {datasets or '—'}",
        f"- **harness**: {h.get('version', '—')} ({str(h.get('git_sha') or '')[:12]}"
        + (", dirty" if h.get("git_dirty") else "")
        + ")",
        f"- **items**: {(res.get('run') or {}).get('n_items', '—')}",
        f"- **created**: {(res.get('run') or {}).get('created_at', '—')}",
        "",
        "## Results",
        "",
        "Correlation of the judge's score with the human rating per language (mean over datasets), 95% "
        "bootstrap CI in brackets, * p < 0.05.",
        "",
        results_markdown(run),
        "## Files",
        "",
        f"- `{RESULTS_FILE}`: every number above with its provenance (judge identity, decoding, prompts, "
        "dataset fingerprint, library versions).",
        f"- `{SAMPLES_FILE}` (config `samples`): one row per judged item — score, raw output, parse status, "
        "human rating and every annotator's label.",
    ]
    if with_items:
        lines.append(
            f"- `{ITEMS_FILE}` (config `items`): the dialogues (context, response, reference) the samples rate."
        )
    lines += [
        "",
        "```python",
        "from datasets import load_dataset",
        f'samples = load_dataset("{repo_id}", "samples", split="test", revision="v{version}")',
        "```",
        "",
        "Look at it in the viewer: `harness view hub:" + repo_id + f"@v{version}`.",
        "",
    ]
    return "\n".join(lines)


def write_items(run: RunFiles, dest: Path) -> int:
    """The transcripts the run's samples rate, as ``items.parquet``; returns the row count."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    items = Transcripts(con, run)
    src = items.source()
    if src is None:
        raise ValueError(
            f"{run.path}: no transcripts to publish ({'; '.join(items.notes) or 'no dataset recorded'}); "
            "publish without --with-transcripts"
        )
    samples = str(run.samples).replace("'", "''")
    out = str(dest).replace("'", "''")
    cols = ", ".join(f'i."{c}"' for c in COLUMNS)
    con.execute(
        f"""COPY (SELECT DISTINCT ON (i.dataset, i.id) {cols} FROM {src} i
                  SEMI JOIN read_parquet('{samples}') s ON s.dataset = i.dataset AND s.id = i.id
                  ORDER BY i.dataset, i.id) TO '{out}' (FORMAT parquet)"""
    )
    return int(con.execute(f"SELECT count(*) FROM read_parquet('{out}')").fetchall()[0][0])


def stage(run: RunFiles, folder: Path, repo_id: str, version: str, with_items: bool) -> Payload:
    if run.samples is None:
        raise ValueError(f"{run.path}: no {SAMPLES_FILE}; a run without per-sample rows cannot be published")
    shutil.copyfile(run.path / RESULTS_FILE, folder / RESULTS_FILE)
    shutil.copyfile(run.samples, folder / SAMPLES_FILE)
    n_items = write_items(run, folder / ITEMS_FILE) if with_items else None
    (folder / "README.md").write_text(card(run, repo_id, version, with_items), encoding="utf-8")
    return {"items": n_items}


def publish_run(
    run_dir: str | Path,
    repo_id: str,
    version: str = "1.0.0",
    *,
    with_transcripts: bool = False,
    private: bool = False,
    endpoint: str | None = None,
) -> tuple[PublishResult, Payload]:
    """Publish one run directory to the Hub dataset repo ``repo_id`` as ``v{version}``."""
    run = read_run(run_dir)
    if (run.results.get("incomplete") or {}) and not run.results.get("results"):
        raise ValueError(f"{run.path}: the run is incomplete and has no results")
    with tempfile.TemporaryDirectory(prefix="dialeval-run-publish-") as tmp:
        folder = Path(tmp)
        info = stage(run, folder, repo_id, version, with_transcripts)
        result = publish_dataset(
            folder,
            repo_id,
            version,
            private=private,
            endpoint=endpoint,
            commit_message=f"Publish run {run.run_id} v{version}",
        )
    info |= {"run_id": run.run_id, "judge": run.judge, "incomplete": bool(run.results.get("incomplete"))}
    return result, info


def summary_json(result: PublishResult, info: Mapping[str, object]) -> str:
    return json.dumps({**result.to_dict(), **info}, indent=2)
