"""An annotation project: one SQLite file holding the items, the annotators' queues and every label.

The file is in WAL mode with ``synchronous=FULL``: every submission is one transaction committed
before the answer, so a killed server loses nothing it acknowledged, and a restarted one resumes
each queue where it stopped (the queue is the list of the annotator's items not yet submitted, in a
fixed order). Submissions are idempotent by their client-made ``submission_id`` (a UNIQUE column):
the same submission twice is recorded once.

Tokens: each annotator reaches the project through a private URL holding a random token
(:func:`secrets.token_urlsafe`); only its SHA-256 is stored, and a token is checked against every
stored hash with :func:`hmac.compare_digest`.

Blind: an :class:`ItemView` carries the text an annotator judges (the dialogue, the response, the
reference, persona and scene) and an opaque item id, never the system, model or judge behind it.

Bad input is an :class:`AnnotationError` with the HTTP status the web layer answers (400 a label
off the form's scale or an unknown dimension, 403 an unknown or revoked token, 404 an item outside
the annotator's queue, 409 an item already submitted or a submission id reused for another item)
and nothing is written.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import math
import os
import random
import re
import secrets
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import pyarrow.parquet as pq

from harness.annotate.form import Form, form_for
from harness.data.layout import data_file
from harness.provenance import utc_now

if TYPE_CHECKING:
    import pandas as pd

    from harness.annotate.active import ActivePlan
    from harness.tasks import TaskSpec

SCHEMA_VERSION = "1"
#: languages written right to left (ISO 639 base codes)
RTL_LANGUAGES = frozenset({"ar", "he", "fa", "ur", "ps", "yi", "dv", "sd", "ug", "ckb"})
MAX_FLAG_CHARS = 2000
MAX_ID_CHARS = 128
_PROJECT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
_ANNOTATOR = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
_BATCH = 20_000
#: active selection: the uniform share of the sampling distribution, and the metric it targets
ACTIVE_FLOOR = 0.1
ACTIVE_METRIC = "pearson"
Select = Literal["random", "active"]
#: what an item's group (metadata known before labelling, for the calibrated estimate) is
GroupBy = Literal["system", "dataset", "none"]
GROUP_BY: tuple[str, ...] = ("system", "dataset", "none")

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE annotators (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, token_hash TEXT, revoked INTEGER NOT NULL DEFAULT 0,
    total INTEGER NOT NULL DEFAULT 0, done INTEGER NOT NULL DEFAULT 0, skipped INTEGER NOT NULL DEFAULT 0,
    flagged INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE items (
    id INTEGER PRIMARY KEY, key TEXT NOT NULL, config TEXT NOT NULL, record_id TEXT NOT NULL,
    language TEXT NOT NULL, record TEXT NOT NULL, q REAL, step_q REAL,
    system TEXT, grp TEXT, judge REAL, surrogate REAL
);
CREATE TABLE assignments (
    annotator INTEGER NOT NULL, item INTEGER NOT NULL, position INTEGER NOT NULL,
    state INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE submissions (
    id INTEGER PRIMARY KEY, submission_id TEXT NOT NULL UNIQUE, annotator INTEGER NOT NULL,
    item INTEGER NOT NULL, labels TEXT NOT NULL, skip INTEGER NOT NULL, flag TEXT,
    submitted_at TEXT NOT NULL, retracted INTEGER NOT NULL DEFAULT 0
);
"""
# built after the bulk insert (faster than maintaining them row by row)
_INDEXES = """
CREATE UNIQUE INDEX items_key ON items (key);
CREATE UNIQUE INDEX assignment ON assignments (annotator, item);
CREATE INDEX queue ON assignments (annotator, state, position);
CREATE INDEX by_item ON assignments (item);
CREATE INDEX history ON submissions (annotator, retracted, id);
CREATE INDEX item_history ON submissions (item, annotator, id);
"""


class AnnotationError(ValueError):
    """Bad input to a project; ``status`` is the HTTP status the web layer answers with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ProjectError(ValueError):
    """A project cannot be created or opened (an existing name, no item, a bad annotator list)."""


@dataclass(frozen=True)
class ItemView:
    """What an annotator sees of one item (blind: no system, model or judge names)."""

    item_id: str
    position: int  # 1-based place in the annotator's queue
    total: int
    language: str
    direction: Literal["ltr", "rtl"]
    level: Literal["turn", "dialogue"]
    context: list[dict[str, str | int]]  # [{"role", "text", "turn" (1-based)}]
    response: str | None
    response_role: str | None
    reference: str | None
    persona: str | None
    scene: str | None
    turns: list[dict[str, str | int]] | None  # dialogue level
    previous: dict[str, float] | None  # the annotator's own earlier labels (after undo)

    @classmethod
    def from_record(
        cls,
        key: str,
        language: str,
        record: Mapping[str, object],
        level: Literal["turn", "dialogue"],
        *,
        position: int,
        total: int,
        previous: dict[str, float] | None = None,
    ) -> ItemView:
        """The view of a stored source record (the page's and Label Studio's: one mapping)."""
        turn = level == "turn"
        return cls(
            item_id=key,
            position=position,
            total=total,
            language=language,
            direction=direction(language),
            level=level,
            context=_numbered(record.get("context")) if turn else [],
            response=_text(record.get("response")) if turn else None,
            response_role=(_text(record.get("response_role")) or "assistant") if turn else None,
            reference=_text(record.get("reference")),
            persona=_text(record.get("persona")),
            scene=_text(record.get("scene")),
            turns=None if turn else _numbered(record.get("turns")),
            previous=previous,
        )

    def to_json(self) -> dict[str, object]:
        return {
            "item_id": self.item_id,
            "position": self.position,
            "total": self.total,
            "language": self.language,
            "direction": self.direction,
            "level": self.level,
            "context": self.context,
            "response": self.response,
            "response_role": self.response_role,
            "reference": self.reference,
            "persona": self.persona,
            "scene": self.scene,
            "turns": self.turns,
            "previous": self.previous,
        }


def _numbered(rows: object) -> list[dict[str, str | int]]:
    """A stored list of {role, text} messages with 1-based turn numbers (anything else: none)."""
    messages = rows if isinstance(rows, list) else []
    return [
        {"role": str(m.get("role", "")), "text": str(m.get("text", "")), "turn": i}
        for i, m in enumerate(messages, 1)
        if isinstance(m, dict)
    ]


def _text(value: object) -> str | None:
    return None if value is None or value == "" else str(value)


@dataclass(frozen=True)
class ActivePool:
    """The pool information of an active project's calibrated estimate, one entry per planned
    item (aligned with ``item_ids``): the judge's score, the surrogate's (None without a surrogate
    run) and the group (None with ``--group-by none``)."""

    item_ids: tuple[str, ...]
    judge: np.ndarray
    surrogate: np.ndarray | None
    groups: tuple[str, ...] | None
    group_by: str


@dataclass(frozen=True)
class Progress:
    """An annotator's queue: ``done`` items submitted (labelled, skipped or flagged), of ``total``."""

    done: int
    skipped: int
    flagged: int
    total: int

    def to_json(self) -> dict[str, int]:
        return {"done": self.done, "skipped": self.skipped, "flagged": self.flagged, "total": self.total}


@dataclass(frozen=True)
class Submission:
    """One answer of an annotator: every field of the form, or a skip, optionally with a flag."""

    item_id: str
    submission_id: str  # client-made (a uuid); the same id again is recorded once
    labels: dict[str, float] = field(default_factory=dict)
    skip: bool = False
    flag: str | None = None  # a comment; flags the item

    @classmethod
    def from_json(cls, data: object) -> Submission:
        """A submission from a decoded JSON body; a malformed one is an :class:`AnnotationError` (400)."""
        if not isinstance(data, dict):
            raise AnnotationError(
                400, "the body must be a JSON object with item_id, submission_id and labels"
            )
        unknown = sorted(set(data) - {"item_id", "submission_id", "labels", "skip", "flag"})
        if unknown:
            raise AnnotationError(400, f"unknown field(s) {', '.join(map(repr, unknown))} in the submission")
        item, sid = data.get("item_id"), data.get("submission_id")
        labels = data.get("labels", {}) or {}
        skip, flag = data.get("skip", False), data.get("flag")
        if not isinstance(item, str) or not isinstance(sid, str):
            raise AnnotationError(400, "item_id and submission_id must be strings")
        if not isinstance(labels, dict) or not all(isinstance(k, str) for k in labels):
            raise AnnotationError(400, "labels must be an object of dimension -> number")
        if not isinstance(skip, bool):
            raise AnnotationError(400, "skip must be true or false")
        if flag is not None and not isinstance(flag, str):
            raise AnnotationError(400, "flag must be a string (the comment) or null")
        return cls(item_id=item, submission_id=sid, labels=dict(labels), skip=skip, flag=flag)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def direction(language: str) -> Literal["ltr", "rtl"]:
    return "rtl" if language.split("-")[0].lower() in RTL_LANGUAGES else "ltr"


def projects_dir() -> Path:
    """Where projects live by default: ``$DIALEVAL_HOME/annotations``."""
    from harness.cache import default_home

    return default_home() / "annotations"


def project_path(name: str, directory: Path | None = None) -> Path:
    """The SQLite file of project ``name`` (in ``directory``, default :func:`projects_dir`)."""
    if not _PROJECT.match(name or ""):
        raise ProjectError(
            f"invalid project name {name!r}: 1 to 96 letters, digits, '_', '.' or '-', starting with a letter or digit"
        )
    return Path(directory or projects_dir()) / f"{name}.sqlite"


def check_annotators(names: Sequence[str]) -> list[str]:
    """The annotator names, checked: at least one, each a short id, no duplicates."""
    out = [n.strip() for n in names if n.strip()]
    if not out:
        raise ProjectError("no annotator given; name them with --annotators a,b,c")
    bad = [n for n in out if not _ANNOTATOR.match(n)]
    if bad:
        raise ProjectError(
            f"annotator name {bad[0]!r} is not allowed: 1 to 64 letters, digits, '_', '.', '@' or '-', "
            "starting with a letter or digit"
        )
    dupes = sorted({n for n in out if out.count(n) > 1})
    if dupes:
        raise ProjectError(f"duplicate annotator(s) {', '.join(dupes)} in --annotators; name each once")
    return out


def assign(n_items: int, n_annotators: int, per_item: int, rng: random.Random) -> Iterator[list[int]]:
    """For each item in turn, the ``per_item`` distinct annotators that label it.

    Balanced: annotators are drawn round after round from a shuffled pool, so their loads never
    differ by more than one; the pairs that share an item vary at random (every pair meets, for the
    agreement tables)."""
    pool: list[int] = []  # the annotators of the current round not drawn yet
    for _ in range(n_items):
        if len(pool) >= per_item:
            chosen = pool[-per_item:]
            del pool[-per_item:]
        else:  # the rest of this round, topped up from a new round (excluding those already chosen)
            chosen = pool
            fresh = list(range(n_annotators))
            rng.shuffle(fresh)
            top_up = [a for a in fresh if a not in chosen][: per_item - len(chosen)]
            chosen = chosen + top_up
            pool = [a for a in fresh if a not in top_up]
        yield chosen


class Project:
    """An annotation project (one SQLite file); safe to share between threads."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self._conn = conn
        self._lock = threading.RLock()
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        self.meta: dict[str, str] = meta
        self.name: str = meta["name"]
        self.form: Form = Form.from_record(meta["form"])
        self._fresh_tokens: dict[str, str] = {}

    # -- creation --------------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: Path,
        *,
        name: str,
        dataset_ref: str,
        dataset_dir: Path,
        config: str | None,
        task: str | TaskSpec | None,
        annotators: Sequence[str],
        per_item: int,
        languages: Sequence[str] | None,
        select: Select = "random",
        judge_run: Path | None = None,
        seed: int = 0,
        surrogate_run: Path | None = None,
        group_by: GroupBy | None = None,
        show_progress: bool = False,
    ) -> Project:
        """Create the project file at ``path`` (refused if it exists): read the items of the form's
        configs (in ``languages``, all if None), assign each to ``per_item`` annotators and order the
        queues (``random``: a seeded shuffle; ``active``: the calibrated sampling plan of
        :mod:`harness.annotate.active` over the judge run's scores).

        ``group_by`` (active selection): each item's group for the calibrated estimate, metadata
        known before labelling — ``system`` (the system that wrote the item, where the dataset
        records one; items without one are grouped by their config), ``dataset`` (the item's
        config, i.e. its source set) or ``none``. Default: ``system`` when the dataset records a
        system for any of the items, else ``dataset``."""
        from harness.tasks import TaskSpec, get_task

        path = Path(path)
        if path.exists():
            raise ProjectError(
                f"an annotation project already exists at {path}; choose another name, or serve it with "
                "`harness annotate serve`"
            )
        names = check_annotators(annotators)
        if not 1 <= per_item <= len(names):
            raise ProjectError(
                f"--per-item {per_item} must be between 1 and the number of annotators ({len(names)})"
            )
        if select not in ("random", "active"):
            raise ProjectError(f"unknown selection {select!r}; use random or active")
        if select == "active" and judge_run is None:
            raise ProjectError(
                "--select active needs --judge-run RUN (the judge whose agreement is estimated)"
            )
        if group_by is not None and group_by not in GROUP_BY:
            raise ProjectError(f"unknown --group-by {group_by!r}; use {', '.join(GROUP_BY)}")
        if group_by is not None and select != "active":
            raise ProjectError(
                "--group-by only applies to --select active (the groups calibrate its estimate)"
            )
        spec = get_task(task) if isinstance(task, str) else task
        assert spec is None or isinstance(spec, TaskSpec)
        form = form_for(Path(dataset_dir), spec, config, dataset=dataset_ref)
        langs = [lang.strip() for lang in languages or [] if lang.strip()] or None

        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.creating")
        try:
            conn = _connect(tmp)
            with contextlib.closing(conn):
                conn.executescript(_SCHEMA)
                tokens = _create(
                    conn,
                    form=form,
                    name=name,
                    dataset_ref=dataset_ref,
                    dataset_dir=Path(dataset_dir),
                    annotators=names,
                    per_item=per_item,
                    languages=langs,
                    select=select,
                    judge_run=judge_run,
                    surrogate_run=surrogate_run,
                    group_by=group_by,
                    seed=seed,
                    show_progress=show_progress,
                )
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            if path.exists():
                raise ProjectError(f"an annotation project already exists at {path}")
            os.rename(tmp, path)
        finally:
            for p in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                p.unlink(missing_ok=True)
        project = cls.open(path)
        project._fresh_tokens = tokens
        return project

    @classmethod
    def open(cls, path: Path) -> Project:
        path = Path(path)
        if not path.is_file():
            raise ProjectError(f"no annotation project at {path}; create one with `harness annotate start`")
        conn = _connect(path)
        try:
            version = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        except sqlite3.DatabaseError as e:
            conn.close()
            raise ProjectError(f"{path} is not an annotation project ({e})") from None
        if version is None or version[0] != SCHEMA_VERSION:
            conn.close()
            raise ProjectError(f"{path} is not an annotation project of this version (schema {version})")
        return cls(path, conn)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Project:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_meta(self, **values: str) -> None:
        """Record settings of the project (e.g. the host and port its addresses use)."""
        with self._lock, self._write():
            self._conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", sorted(values.items()))
        self.meta.update(values)

    # -- annotators and tokens --------------------------------------------------------------------
    def annotators(self) -> list[str]:
        with self._lock:
            return [r[0] for r in self._conn.execute("SELECT name FROM annotators ORDER BY id")]

    def tokens(self) -> dict[str, str]:
        """annotator -> token, for the tokens made by this object (at creation, or
        :meth:`issue_token`): only their hashes are stored, so they cannot be read back later."""
        return dict(self._fresh_tokens)

    def issue_token(self, annotator: str) -> str:
        """A new token for ``annotator`` (the old one stops working; a revoked annotator is let in again)."""
        self._annotator_id(annotator)
        token = secrets.token_urlsafe(24)
        with self._lock, self._write():
            self._conn.execute(
                "UPDATE annotators SET token_hash = ?, revoked = 0 WHERE name = ?",
                (hash_token(token), annotator),
            )
        self._fresh_tokens[annotator] = token
        return token

    def revoke(self, annotator: str) -> None:
        """The annotator's token stops working (their labels stay)."""
        self._annotator_id(annotator)
        with self._lock, self._write():
            self._conn.execute(
                "UPDATE annotators SET token_hash = NULL, revoked = 1 WHERE name = ?", (annotator,)
            )
        self._fresh_tokens.pop(annotator, None)

    def annotator_for(self, token: str) -> str:
        """The annotator a token belongs to; :class:`AnnotationError` (403) for an unknown or revoked one."""
        if not isinstance(token, str) or not 0 < len(token) <= 256:
            raise AnnotationError(403, "unknown or revoked token")
        digest = hash_token(token)
        with self._lock:
            rows = self._conn.execute("SELECT name, token_hash, revoked FROM annotators").fetchall()
        found = None
        for name, stored, revoked in rows:  # every hash compared, in constant time each
            if hmac.compare_digest(digest, stored or "") and not revoked:
                found = name
        if found is None:
            raise AnnotationError(403, "unknown or revoked token")
        return found

    def _annotator_id(self, annotator: str) -> int:
        with self._lock:
            row = self._conn.execute("SELECT id FROM annotators WHERE name = ?", (annotator,)).fetchone()
        if row is None:
            raise AnnotationError(
                404, f"no annotator {annotator!r} in project {self.name!r} ({', '.join(self.annotators())})"
            )
        return int(row[0])

    # -- queues ----------------------------------------------------------------------------------
    def progress(self, annotator: str) -> Progress:
        aid = self._annotator_id(annotator)
        with self._lock:
            return self._progress(aid)

    def _progress(self, aid: int) -> Progress:
        """The annotator's counters (kept with every submission and undo, so reading them is O(1))."""
        done, skipped, flagged, total = self._conn.execute(
            "SELECT done, skipped, flagged, total FROM annotators WHERE id = ?", (aid,)
        ).fetchone()
        return Progress(int(done), int(skipped), int(flagged), int(total))

    def progress_by_language(self) -> list[tuple[str, str, Progress]]:
        """(annotator, language, progress) for every annotator and language of their queue."""
        with self._lock:
            totals = self._conn.execute(
                "SELECT n.name, i.language, count(*) FROM assignments a JOIN items i ON i.id = a.item "
                "JOIN annotators n ON n.id = a.annotator GROUP BY n.id, i.language ORDER BY n.id, i.language"
            ).fetchall()
            done = {
                (name, lang): (int(d), int(s), int(f))
                for name, lang, d, s, f in self._conn.execute(
                    "SELECT n.name, i.language, count(*), sum(s.skip), sum(s.flag IS NOT NULL) FROM submissions s "
                    "JOIN items i ON i.id = s.item JOIN annotators n ON n.id = s.annotator "
                    "WHERE s.retracted = 0 GROUP BY n.id, i.language"
                )
            }
        return [
            (name, lang, Progress(*done.get((name, lang), (0, 0, 0)), int(total)))
            for name, lang, total in totals
        ]

    def next_item(self, annotator: str) -> ItemView | None:
        """The first item of the annotator's queue not submitted yet (None: the queue is done)."""
        aid = self._annotator_id(annotator)
        with self._lock:
            row = self._conn.execute(
                "SELECT item FROM assignments WHERE annotator = ? AND state = 0 ORDER BY position LIMIT 1",
                (aid,),
            ).fetchone()
            if row is None:
                return None
            return self._view(aid, int(row[0]))

    def submit(self, annotator: str, sub: Submission) -> Progress:
        """Record one submission in one committed transaction; the same ``submission_id`` again is
        a no-op. Nothing is written when it is refused (:class:`AnnotationError`)."""
        aid = self._annotator_id(annotator)
        if not isinstance(sub.submission_id, str) or not 0 < len(sub.submission_id) <= MAX_ID_CHARS:
            raise AnnotationError(400, f"submission_id must be a string of 1 to {MAX_ID_CHARS} characters")
        if not isinstance(sub.item_id, str) or not 0 < len(sub.item_id) <= MAX_ID_CHARS:
            raise AnnotationError(404, "no such item in your queue")
        labels = self._checked_labels(sub)
        with self._lock:
            prior = self._conn.execute(
                "SELECT s.annotator, i.key FROM submissions s JOIN items i ON i.id = s.item WHERE s.submission_id = ?",
                (sub.submission_id,),
            ).fetchone()
            if prior is not None:
                if prior[0] == aid and prior[1] == sub.item_id:
                    return self._progress(aid)  # the same submission again: recorded once
                raise AnnotationError(409, "this submission_id was already used for another submission")
            row = self._conn.execute(
                "SELECT a.item, a.state FROM items i JOIN assignments a ON a.item = i.id AND a.annotator = ? "
                "WHERE i.key = ?",
                (aid, sub.item_id),
            ).fetchone()
            if row is None:
                raise AnnotationError(404, f"item {sub.item_id!r} is not in your queue")
            item, state = int(row[0]), int(row[1])
            if state != 0:
                raise AnnotationError(
                    409, f"item {sub.item_id!r} is already submitted; undo it to change its labels"
                )
            with self._write():
                self._conn.execute(
                    "INSERT INTO submissions (submission_id, annotator, item, labels, skip, flag, submitted_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        sub.submission_id,
                        aid,
                        item,
                        json.dumps(labels),
                        int(sub.skip),
                        sub.flag,
                        utc_now(),
                    ),
                )
                self._conn.execute(
                    "UPDATE assignments SET state = 1 WHERE annotator = ? AND item = ?", (aid, item)
                )
                self._conn.execute(
                    "UPDATE annotators SET done = done + 1, skipped = skipped + ?, flagged = flagged + ? "
                    "WHERE id = ?",
                    (int(sub.skip), int(sub.flag is not None), aid),
                )
            return self._progress(aid)

    def undo(self, annotator: str) -> ItemView | None:
        """Reopen the annotator's last submitted item (its labels come back as ``previous``);
        None when nothing is left to undo."""
        aid = self._annotator_id(annotator)
        with self._lock:
            row = self._conn.execute(
                "SELECT id, item, skip, flag IS NOT NULL FROM submissions WHERE annotator = ? AND retracted = 0 "
                "ORDER BY id DESC LIMIT 1",
                (aid,),
            ).fetchone()
            if row is None:
                return None
            with self._write():
                self._conn.execute("UPDATE submissions SET retracted = 1 WHERE id = ?", (row[0],))
                self._conn.execute(
                    "UPDATE annotators SET done = done - 1, skipped = skipped - ?, flagged = flagged - ? "
                    "WHERE id = ?",
                    (int(row[2]), int(row[3]), aid),
                )
                self._conn.execute(
                    "UPDATE assignments SET state = 0 WHERE annotator = ? AND item = ?", (aid, row[1])
                )
            return self._view(aid, int(row[1]))

    def _checked_labels(self, sub: Submission) -> dict[str, float]:
        if not isinstance(sub.labels, dict):
            raise AnnotationError(400, "labels must be an object of dimension -> number")
        unknown = sorted(k for k in sub.labels if k not in self.form.dimensions)
        if unknown:
            raise AnnotationError(
                400,
                f"unknown dimension {unknown[0]!r}; this form has {', '.join(self.form.dimensions)}",
            )
        if sub.flag is not None and (not isinstance(sub.flag, str) or len(sub.flag) > MAX_FLAG_CHARS):
            raise AnnotationError(400, f"a flag is a comment of at most {MAX_FLAG_CHARS} characters")
        if sub.skip and sub.labels:
            raise AnnotationError(400, "a skipped item carries no labels; send either labels or skip")
        out: dict[str, float] = {}
        for dim, value in sub.labels.items():
            problem = self.form.field(dim).problem(value)
            if problem:
                raise AnnotationError(400, problem)
            out[dim] = float(value)
        missing = [d for d in self.form.dimensions if d not in out]
        if missing and not sub.skip and sub.flag is None:
            raise AnnotationError(
                400, f"missing label(s) for {', '.join(missing)}; label every field, skip, or flag the item"
            )
        return out

    def _view(self, aid: int, item: int) -> ItemView:
        key, language, record = self._conn.execute(
            "SELECT key, language, record FROM items WHERE id = ?", (item,)
        ).fetchone()
        progress = self._progress(aid)
        total, done = progress.total, progress.done
        prev = self._conn.execute(
            "SELECT labels FROM submissions WHERE item = ? AND annotator = ? AND retracted = 1 ORDER BY id DESC LIMIT 1",
            (item, aid),
        ).fetchone()
        return ItemView.from_record(
            key,
            language,
            json.loads(record),
            self.form.level,
            position=min(int(done) + 1, int(total)),
            total=int(total),
            previous=json.loads(prev[0]) if prev else None,
        )

    @contextlib.contextmanager
    def _write(self) -> Iterator[None]:
        """One committed transaction (BEGIN IMMEDIATE ... COMMIT; ROLLBACK on any error)."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    # -- reading everything -----------------------------------------------------------------------
    def n_items(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT count(*) FROM items").fetchone()[0])

    def items(self) -> pd.DataFrame:
        """One row per item: item_id (the opaque key), config, record_id, language, q (the active
        plan's sampling probability, else NaN) and the annotators it is assigned to."""
        import pandas as pd

        with self._lock:
            rows = self._conn.execute(
                "SELECT i.key, i.config, i.record_id, i.language, i.q, group_concat(n.name, ',') "
                "FROM items i LEFT JOIN assignments a ON a.item = i.id LEFT JOIN annotators n ON n.id = a.annotator "
                "GROUP BY i.id ORDER BY i.id"
            ).fetchall()
        return pd.DataFrame(
            [(k, c, r, lang, q, (a or "").split(",") if a else []) for k, c, r, lang, q, a in rows],
            columns=["item_id", "config", "record_id", "language", "q", "annotators"],
        )

    def active_plan(self) -> ActivePlan | None:
        """The sampling plan an active project's queues follow (None for random selection): the
        planned items (those the judge run scored), their probabilities and the order they were drawn."""
        if self.meta.get("select") != "active":
            return None
        from harness.annotate.active import ActivePlan

        with self._lock:
            rows = self._conn.execute(
                "SELECT i.key, i.q, i.step_q, min(a.position) AS pos FROM items i JOIN assignments a "
                "ON a.item = i.id WHERE i.q IS NOT NULL GROUP BY i.id ORDER BY i.id"
            ).fetchall()
        by_position = sorted(rows, key=lambda r: r[3])
        return ActivePlan(
            item_ids=tuple(r[0] for r in rows),
            q=np.array([r[1] for r in rows], dtype=float),
            order=tuple(r[0] for r in by_position),
            policy="active",
            floor=float(self.meta.get("active_floor", ACTIVE_FLOOR)),
            calibrated=self.meta.get("active_calibrated") == "1",
            step_q=np.array([r[2] for r in by_position], dtype=float),
        )

    def active_pool(self) -> ActivePool | None:
        """What the project knows of every planned item before labelling — the judge's and the
        surrogate's scores and the group — aligned with :meth:`active_plan`'s ``item_ids``; None
        for random selection, or a project made before these were stored."""
        if self.meta.get("select") != "active" or "group_by" not in self.meta:
            return None
        with self._lock:
            rows = self._conn.execute(
                "SELECT key, judge, surrogate, grp FROM items WHERE q IS NOT NULL ORDER BY id"
            ).fetchall()
        surrogate = None if any(r[2] is None for r in rows) else np.array([r[2] for r in rows], dtype=float)
        groups = None if self.meta["group_by"] == "none" else tuple(str(r[3]) for r in rows)
        return ActivePool(
            item_ids=tuple(r[0] for r in rows),
            judge=np.array([r[1] for r in rows], dtype=float),
            surrogate=surrogate,
            groups=groups,
            group_by=self.meta["group_by"],
        )

    def records(self) -> Iterator[tuple[str, str, dict[str, object]]]:
        """(item key, config, source record without its labels) of every item, in the dataset's order."""
        with self._lock:
            rows = self._conn.execute("SELECT key, config, record FROM items ORDER BY id").fetchall()
        for key, config, record in rows:
            yield key, config, json.loads(record)

    def labels(self) -> pd.DataFrame:
        """One row per (item_id, annotator, dimension) of the current submissions: value (NaN when
        skipped or flagged without a label), skipped, flag, submitted_at; plus config, record_id and
        language of the item."""
        import pandas as pd

        with self._lock:
            rows = self._conn.execute(
                "SELECT i.key, i.config, i.record_id, i.language, n.name, s.labels, s.skip, s.flag, s.submitted_at "
                "FROM submissions s JOIN items i ON i.id = s.item JOIN annotators n ON n.id = s.annotator "
                "WHERE s.retracted = 0 ORDER BY s.id"
            ).fetchall()
        out = []
        for key, config, rid, lang, name, labels, skip, flag, at in rows:
            values = json.loads(labels)
            for dim in self.form.dimensions:
                out.append(
                    (key, name, dim, values.get(dim, math.nan), bool(skip), flag, at, config, rid, lang)
                )
        return pd.DataFrame(
            out,
            columns=[
                "item_id",
                "annotator",
                "dimension",
                "value",
                "skipped",
                "flag",
                "submitted_at",
                "config",
                "record_id",
                "language",
            ],
        )


# -- module-private -------------------------------------------------------------------------------


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def _read_items(
    dataset_dir: Path, form: Form, languages: Sequence[str] | None
) -> Iterator[list[tuple[str, str, str, str, str | None]]]:
    """Batches of (config, record id, language, record JSON without its labels, system or None) of every row in
    ``languages``: DuckDB reads the Parquet files and writes each row's JSON (``to_json``), which
    keeps creating a project of a million items to seconds of reading."""
    import duckdb

    drop = {"labels", "aggregates", "rating"}
    con = duckdb.connect()
    try:
        for config in form.configs:
            path = str(Path(dataset_dir) / data_file(config))
            names = [c.name for c in pq.read_schema(path) if c.name not in drop]
            fields = ", ".join(f"{_quoted(n)} := {_quoted(n)}" for n in names)
            system = "CAST(system AS VARCHAR)" if "system" in names else "NULL"
            sql = f"SELECT id, language, to_json(struct_pack({fields})), {system} FROM read_parquet(?)"
            params: list[object] = [path]
            if languages is not None:
                sql += " WHERE list_contains(?, language)"
                params.append(list(languages))
            cursor = con.execute(sql, params)
            while rows := cursor.fetchmany(_BATCH):
                yield [
                    (config, str(rid), str(lang), str(record), None if sys_ is None else str(sys_))
                    for rid, lang, record, sys_ in rows
                ]
    finally:
        con.close()


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _create(
    conn: sqlite3.Connection,
    *,
    form: Form,
    name: str,
    dataset_ref: str,
    dataset_dir: Path,
    annotators: list[str],
    per_item: int,
    languages: list[str] | None,
    select: Select,
    judge_run: Path | None,
    surrogate_run: Path | None,
    group_by: GroupBy | None,
    seed: int,
    show_progress: bool,
) -> dict[str, str]:
    rng = random.Random(seed)
    tokens = {a: secrets.token_urlsafe(24) for a in annotators}
    conn.execute("BEGIN")
    meta = {
        "schema": SCHEMA_VERSION,
        "name": name,
        "dataset": dataset_ref,
        "dataset_dir": str(Path(dataset_dir).resolve()),
        "task": form.task or "",
        "per_item": str(per_item),
        "languages": ",".join(languages or []),
        "select": select,
        "judge_run": str(Path(judge_run).resolve()) if judge_run else "",
        "surrogate_run": str(Path(surrogate_run).resolve()) if surrogate_run else "",
        "seed": str(seed),
        "created_at": utc_now(),
        "form": form.to_record(),
    }
    conn.executemany("INSERT INTO meta VALUES (?, ?)", sorted(meta.items()))
    conn.executemany(
        "INSERT INTO annotators (id, name, token_hash) VALUES (?, ?, ?)",
        [(i, a, hash_token(tokens[a])) for i, a in enumerate(annotators)],
    )
    n = 0
    salt = f"{seed}:{name}:"
    rows_in_files = sum(pq.read_metadata(Path(dataset_dir) / data_file(c)).num_rows for c in form.configs)
    with _bar(show_progress, "reading items", total=None if languages else rows_in_files) as advance:
        for batch in _read_items(dataset_dir, form, languages):
            items: list[tuple[int, str, str, str, str, str, str | None]] = []
            for config, rid, language, record, system in batch:
                key = hashlib.sha256(f"{salt}{config}\x00{rid}".encode()).hexdigest()[:16]
                items.append((n, key, config, rid, language, record, system))
                n += 1
            conn.executemany(
                "INSERT INTO items (id, key, config, record_id, language, record, system) VALUES (?,?,?,?,?,?,?)",
                items,
            )
            advance(len(items))
    if n == 0:
        where = f" in language(s) {', '.join(languages)}" if languages else ""
        raise ProjectError(
            f"the dataset {dataset_ref} (configs {', '.join(form.configs)}) has no item{where}"
        )
    extra: dict[str, str] = {}
    if select == "active":
        extra["group_by"] = _set_groups(conn, group_by, dataset_ref)
    order, planned = _queue_order(conn, n, select, judge_run, surrogate_run, seed, rng, form.task, extra)
    if planned is not None:
        conn.executemany("UPDATE items SET q = ?, step_q = ?, judge = ?, surrogate = ? WHERE id = ?", planned)
    conn.executemany("INSERT INTO meta VALUES (?, ?)", sorted(extra.items()))
    loads = [0] * len(annotators)
    with _bar(show_progress, "assigning items", total=n) as advance:
        rows: list[tuple[int, int, int]] = []
        for position, (item, chosen) in enumerate(
            zip(order, assign(n, len(annotators), per_item, rng), strict=True)
        ):
            rows.extend((a, item, position) for a in chosen)
            for a in chosen:
                loads[a] += 1
            if len(rows) >= _BATCH:
                conn.executemany("INSERT INTO assignments (annotator, item, position) VALUES (?,?,?)", rows)
                advance(len(rows) // per_item)
                rows = []
        conn.executemany("INSERT INTO assignments (annotator, item, position) VALUES (?,?,?)", rows)
        advance(len(rows) // per_item)
    conn.executemany("UPDATE annotators SET total = ? WHERE id = ?", [(k, a) for a, k in enumerate(loads)])
    for statement in filter(str.strip, _INDEXES.split(";")):
        conn.execute(statement)
    conn.execute("COMMIT")
    return tokens


def _set_groups(conn: sqlite3.Connection, group_by: GroupBy | None, dataset_ref: str) -> str:
    """Write each item's group (``grp``) by the rule ``group_by`` (None: ``system`` when the
    dataset records a system for any item, else ``dataset``); the rule applied."""
    has_system = conn.execute("SELECT EXISTS (SELECT 1 FROM items WHERE system IS NOT NULL)").fetchone()[0]
    rule = group_by or ("system" if has_system else "dataset")
    if rule == "system" and not has_system:
        raise ProjectError(
            f"--group-by system: the dataset {dataset_ref} records no system for any of the project's items; "
            "use --group-by dataset (the item's config) or none"
        )
    if rule == "system":
        conn.execute(
            "UPDATE items SET grp = CASE WHEN system IS NOT NULL THEN 'system:' || system "
            "ELSE 'dataset:' || config END"
        )
    elif rule == "dataset":
        conn.execute("UPDATE items SET grp = 'dataset:' || config")
    return rule


def _queue_order(
    conn: sqlite3.Connection,
    n: int,
    select: Select,
    judge_run: Path | None,
    surrogate_run: Path | None,
    seed: int,
    rng: random.Random,
    task: str | None,
    meta: dict[str, str],
) -> tuple[list[int], list[tuple[float, float, float, float | None, int]] | None]:
    """The order items enter the queues (item ids) and, for active selection, each planned item's
    (q, probability when drawn, item id) (:mod:`harness.annotate.active`). Random: a seeded shuffle.
    Active: the calibrated plan's order over the items the judge run (and the surrogate run) scored;
    items they could not score follow, shuffled, outside the plan. Each planned item's row also
    carries the judge's and the surrogate's score (the pool moments of the calibrated estimate)."""
    order = list(range(n))
    rng.shuffle(order)
    if select == "random" or judge_run is None:
        return order, None
    from harness.annotate.active import plan_active
    from harness.annotate.judge_runs import scores_for

    keys = [(c, r) for c, r in conn.execute("SELECT config, record_id FROM items ORDER BY id")]
    task_name, judge = scores_for(judge_run, task, keys)
    surrogate = scores_for(surrogate_run, task_name, keys)[1] if surrogate_run is not None else None
    scored = [i for i in range(n) if judge[i] is not None and (surrogate is None or surrogate[i] is not None)]
    if len(scored) < 3:
        raise ProjectError(
            f"the judge run {judge_run} scored {len(scored)} of the project's {n} items; active selection "
            "needs the run of the project's task on the same dataset (harness run --dataset ... --task ...)"
        )
    ids = [str(i) for i in scored]
    pool_judge = np.array([judge[i] for i in scored], dtype=float)
    pool_surrogate = None if surrogate is None else np.array([surrogate[i] for i in scored], dtype=float)
    plan = plan_active(
        ids,
        pool_judge,
        pool_surrogate,
        seed=seed,
        floor=ACTIVE_FLOOR,
        metric=ACTIVE_METRIC,
        calibrated=True,
    )
    meta.update(
        active_task=task_name,
        active_floor=str(ACTIVE_FLOOR),
        active_metric=ACTIVE_METRIC,
        active_calibrated="1",
    )
    planned = [int(i) for i in plan.order]
    at = {item: k for k, item in enumerate(plan.item_ids)}
    in_plan = set(scored)
    rest = [i for i in order if i not in in_plan]
    rows = []
    for i, sq in zip(planned, plan.step_q, strict=True):
        k = at[str(i)]
        sur = None if pool_surrogate is None else float(pool_surrogate[k])
        rows.append((float(plan.q[k]), float(sq), float(pool_judge[k]), sur, i))
    return planned + rest, rows


@contextlib.contextmanager
def _bar(enabled: bool, description: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
    if not enabled:
        yield lambda k: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=False,
    )
    with progress:
        task = progress.add_task(description, total=total)
        yield lambda k: progress.update(task, advance=k)
