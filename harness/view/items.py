"""Transcripts of a run's samples: the dialogue context, the rated response, the reference, or the
whole dialogue, read from the dataset the run used (``results.json`` → ``datasets[task].location``,
the Parquet file of each config it read) or from the run's own ``items.parquet``.

``samples.parquet`` does not repeat the texts; the viewer joins them on (``dataset``, ``id``) in
DuckDB, reading only the files of the datasets asked for, so nothing is loaded before a page needs
it. A dataset that is not on this machine (the run came from elsewhere, or the dataset was removed)
is a note on the run's pages, never an error: scores and labels still show.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.data.layout import data_file
from harness.view.data import RunFiles

MESSAGE = "STRUCT(role VARCHAR, text VARCHAR)[]"
COLUMNS: dict[str, str] = {
    "dataset": "VARCHAR",
    "id": "VARCHAR",
    "language": "VARCHAR",
    "dialogue_id": "VARCHAR",
    "system": "VARCHAR",
    "scene": "VARCHAR",
    "persona": "VARCHAR",
    "context": MESSAGE,
    "response": "VARCHAR",
    "response_role": "VARCHAR",
    "reference": "VARCHAR",
    "turns": MESSAGE,
}


def locate(run: RunFiles) -> tuple[dict[Path, str | None], list[str]]:
    """({Parquet file holding items: the dataset config it holds, or None for any}, notes on what
    could not be found)."""
    if run.items is not None:
        return {run.items: None}, []
    files: dict[Path, str | None] = {}
    notes: list[str] = []
    for task in run.tasks:
        info = run.document.datasets.get(task)
        loc = info.location if info is not None else None
        if not loc:
            notes.append(f"{task}: results.json records no dataset location; transcripts not shown")
            continue
        root = Path(str(loc))
        if not root.is_dir():
            hub = "/" in str(loc) and not Path(str(loc)).is_absolute()
            where = "a Hub dataset, not a local directory" if hub else "not on this machine"
            notes.append(
                f"{task}: the dataset {loc} is {where}; transcripts not shown (build it here, or publish the "
                "run with `harness runs publish --with-transcripts`)"
            )
            continue
        missing = []
        assert info is not None  # it has a location
        for config in info.used_configs or info.configs:
            f = root / data_file(str(config))
            if f.is_file():
                files[f] = str(config)
            else:
                missing.append(str(config))
        if missing:
            notes.append(
                f"{task}: config(s) {', '.join(missing)} missing from {root}; their transcripts not shown"
            )
    return files, notes


def _quote(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


class Transcripts:
    """The run's item files, read with DuckDB: look-ups by (dataset, id) and the SQL text of every
    item (for the search index)."""

    def __init__(self, con: Any, run: RunFiles) -> None:
        import pyarrow.parquet as pq

        self.con = con
        self.files, self.notes = locate(run)
        self.schemas: dict[Path, set[str]] = {}
        for f in list(self.files):
            try:
                names = set(pq.read_schema(f).names)
            except Exception as e:  # noqa: BLE001 - an unreadable file is a note, not a crash
                self.notes.append(f"{f}: unreadable ({type(e).__name__}: {e}); its transcripts not shown")
                del self.files[f]
                continue
            if not {"dataset", "id"} <= names:
                self.notes.append(f"{f}: no dataset/id columns; its transcripts not shown")
                del self.files[f]
                continue
            self.schemas[f] = names

    @property
    def available(self) -> bool:
        return bool(self.files)

    def source(self, datasets: list[str] | None = None) -> str | None:
        """SQL of the items (the columns of :data:`COLUMNS`, NULL where a file has none), restricted to
        the files that can hold ``datasets`` (all files: None); None when there is none."""
        files = [f for f, cfg in self.files.items() if datasets is None or cfg is None or cfg in datasets]
        if not files:
            return None
        present = set().union(*(self.schemas[f] for f in files))
        cols = ", ".join(f'"{c}"' if c in present else f'NULL::{t} AS "{c}"' for c, t in COLUMNS.items())
        return (
            f"(SELECT {cols} FROM read_parquet([{', '.join(_quote(f) for f in files)}], union_by_name=true))"
        )

    @staticmethod
    def text_expr(alias: str = "i") -> str:
        """SQL text of an item (every message, the response, reference, scene and persona)."""
        a = alias
        return (
            f"concat_ws(' ', {a}.response, {a}.reference, {a}.scene, {a}.persona, "
            f"array_to_string(list_transform({a}.context, lambda m: m.text), ' '), "
            f"array_to_string(list_transform({a}.turns, lambda m: m.text), ' '))"
        )

    def _select(self, f: Path) -> str:
        names = self.schemas[f]
        return ", ".join(f'"{c}"' if c in names else f'NULL::{t} AS "{c}"' for c, t in COLUMNS.items())

    def fetch(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
        """Items by (dataset, id), reading only the rows asked for: in each file of those datasets,
        the row numbers of the ids (the id column alone), then those rows."""
        datasets = list(dict.fromkeys(ds for ds, _ in keys))
        files = [f for f, cfg in self.files.items() if cfg is None or cfg in datasets]
        if not files or not keys:
            return {}
        wanted = set(keys)
        ids = list(dict.fromkeys(i for _, i in keys))
        cur = self.con.cursor()
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for f in files:
            hits = cur.execute(
                f"SELECT file_row_number, dataset, id FROM read_parquet({_quote(f)}, file_row_number=true) "
                "WHERE id = ANY(?)",
                [ids],
            ).fetchall()
            rows = sorted(int(n) for n, ds, i in hits if (ds, i) in wanted and (ds, i) not in out)
            if not rows:
                continue
            for r in cur.execute(
                f"SELECT {self._select(f)} FROM read_parquet({_quote(f)}, file_row_number=true) "
                f"WHERE file_row_number IN ({', '.join(map(str, rows))}) ORDER BY file_row_number"
            ).fetchall():
                out.setdefault((r[0], r[1]), dict(zip(COLUMNS, r, strict=True)))
        return out

    def fetch_one(self, sample: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        """The transcript of one sample and a note on how it was found (or why not)."""
        if not self.available:
            return None, "; ".join(self.notes) or "no transcripts for this run"
        key = (str(sample.get("dataset")), str(sample.get("id")))
        found = self.fetch([key]).get(key)
        if found is not None:
            return found, None
        did, src = sample.get("dialogue_id"), self.source([key[0]])
        if did is None or src is None:
            return None, f"item {key[1]} is not in the dataset files of this run"
        # an item a task built from several rows (turns grouped into one dialogue): its last turn
        rows = (
            self.con.cursor()
            .execute(
                f"SELECT * FROM {src} WHERE dataset = ? AND dialogue_id = ? AND (? IS NULL OR system = ?) "
                "ORDER BY len(coalesce(context, [])) DESC, id LIMIT 1",
                [key[0], str(did), sample.get("system"), sample.get("system")],
            )
            .fetchall()
        )
        if not rows:
            return None, f"item {key[1]} (dialogue {did}) is not in the dataset files of this run"
        note = f"built by the task from the turns of dialogue {did}: its last turn in {key[0]} is shown"
        return dict(zip(COLUMNS, rows[0], strict=True)), note
