"""``results.json`` as a typed document: pydantic models, validation on write and read, the typed
reader :func:`load_results`, the migration of older files, and the JSON Schemas shipped with the package.

Schema 3.0 (this harness) keys every entry of ``results[task][language]`` by its structured
:class:`~harness.meta.metric.MetricKey` instead of a slash-joined name: each entry carries
``metric`` (the registered meta-metric), ``level`` (item / dialogue / system), ``group`` (an issue
dimension, ``macro``, or null) and ``params`` (``{"method": "spearman"}``) beside its statistic, and
a language's entries are keyed by the key's :attr:`~harness.meta.metric.MetricKey.label`
(``pearson``, ``system_correlation(spearman)``, ``issue_detection(repetitive,f1_pos)``), checked
on validation. A 1.x or 2.x file is read through :func:`migrate`: each old name
(``"system/spearman"``) becomes its key (:func:`harness.meta.builtin.legacy_key`), the numbers as
they were.

Schema 2.1 is 2.0 plus ``tasks.<task>.meta_metrics`` (the meta-metrics the run
computed, :mod:`harness.meta.registry`; a 2.0 file's are its correlation ``metrics``) and
``tasks.<task>.evaluate_dir`` (2.0: ``evaluate_module``); a 2.0 file is read as it is, marked
``migrated_from``. Schema 2.0 is 1.1 plus a ``samples`` section (the per-sample file, its row count and
row groups: samples.parquet is written as the run goes) and the ``samples_io_s`` timing; the
document is validated against :class:`Results` before it is written and when it is read. A 1.x file
(harness runs before streaming) also gets the sections it may lack as their empty values and
``samples`` from the samples.parquet beside it.

Sections (``Results`` fields): ``run`` (what was run), ``harness`` (version, git sha), ``judge``
(spec, identity, decoding and method per task), ``datasets`` and ``tasks`` (per task), ``results``
(task → language → label → :class:`KeyedEntry`; ``"all"`` = the average over languages),
``parse_failures`` / ``label_parse_failures``, ``usage``, ``cache``, ``timings``, ``environment``,
``executor``, ``samples``, and where they apply ``human_labels``, ``alt_test`` (:class:`AltTest`),
``panel`` (:class:`PanelSection`) and ``incomplete`` (:class:`Incomplete`). Every model accepts
fields it does not declare (a reader ignores what it does not know), so entries that belong to one
method (e.g. MEDAL's McNemar ``kind``/``significant``) stay available as attributes.

The JSON Schemas (``harness/run/schemas/{results,sample,item}.schema.json``) are generated from the
models by :func:`json_schemas` (``python -m harness.run.document`` rewrites them); a test fails when
the shipped files differ from the models.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeAlias

import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from harness.meta.metric import (
    Entries,
    KeyedEntry,
    MetaMetric,
    MetricEntry,
    MetricKey,
    find,
)
from harness.run.records import DialogueItem, SampleRow, TurnItem

SCHEMA_VERSION = "3.0"
READABLE_MAJORS = ("1", "2", "3")
RESULTS_FILE = "results.json"
SAMPLES_FILE = "samples.parquet"
SCHEMA_DIR = Path(__file__).with_name("schemas")


class _Open(BaseModel):
    """A section that keeps fields it does not declare (forward compatible within a major)."""

    model_config = ConfigDict(extra="allow")


#: language (or "all") -> :attr:`MetricKey.label` -> entry (its key's fields and the statistic)
TaskResults = dict[str, Entries]
#: a panel member's (and the vote's) correlations: language (or "all") -> method -> entry
MethodResults = dict[str, dict[str, MetricEntry]]
#: a JSON object this module does not model field by field (its values are opaque here)
JSONObject: TypeAlias = dict[str, object]


class RunInfo(_Open):
    id: str
    created_at: str | None = None
    command: str | None = None
    tasks: list[str] = []
    languages: list[str] | None = None
    limit: int | None = None
    seed: int | None = None
    batch_size: int | None = None
    n_bootstrap: int | None = None
    confidence_level: float | None = None
    n_items: int | None = None


class HarnessInfo(_Open):
    version: str | None = None
    git_sha: str | None = None
    git_dirty: bool | None = None


class JudgeInfo(_Open):
    spec: str
    role: str | None = None
    identity: JSONObject = {}
    decoding: dict[str, JSONObject | None] = Field(default={}, description="per task (null: no decoding)")
    method: dict[str, str] = {}


class BuiltBy(_Open):
    """What built a dataset directory (from its build manifest)."""

    builder: str | None = None
    version: str | None = None
    importer: str | None = Field(default=None, description="import@<version> for an imported dataset")
    mapping: str | None = Field(default=None, description="the importer's mapping name")
    mapping_sha256: str | None = None
    task_builder: str | None = Field(default=None, description="the task's builder, when it differs")


class DatasetInfo(_Open):
    builder: str | None = Field(default=None, description="the builder that built the dataset")
    built_by: BuiltBy | None = None
    location: str | None = None
    revision: str | None = None
    fingerprint: str | None = None
    source: str | None = None
    configs: list[str] = []
    warnings: list[str] = []
    used_configs: list[str] = []
    missing_configs: list[str] = []


class TaskInfo(_Open):
    description: str | None = None
    builder: str | None = None
    configs: list[str] = []
    level: str | None = None
    dimension: str | None = None
    languages: list[str] = []
    scoring: str | None = None
    metrics: list[str] = []
    issue_labels: list[str] = []
    label_names: dict[str, str] = {}
    levels: list[str] = []
    meta_metrics: list[str] = Field(
        default=[], description="the meta-metrics computed (harness ls metrics); older runs: none recorded"
    )


class CacheInfo(_Open):
    enabled: bool | None = None
    path: str | None = None
    hits: int = 0
    misses: int = 0


class Timings(_Open):
    load_dataset_s: float | None = None
    load_judge_s: float | None = None
    scoring_s: float | None = None
    samples_io_s: float | None = None
    meta_eval_s: float | None = None
    total_s: float | None = None
    items_per_s_scoring: float | None = None


class SamplesInfo(_Open):
    """The per-sample file beside results.json."""

    file: str = SAMPLES_FILE
    rows: int | None = Field(default=None, description="rows in the file (= run.n_items)")
    row_groups: int | None = None
    format: str = "parquet"


class AltAnnotator(_Open):
    n: int | None = None
    rho: float | None = None
    p_value: float | None = None
    rejected: bool | None = None
    skipped: str | None = None


class AltEnvironment(_Open):
    omega: float | None = Field(default=None, description="winning rate: share of annotators the judge beats")
    rho: float | None = Field(default=None, description="average advantage probability")
    passed: bool | None = None
    skipped: str | None = None
    warnings: list[str] = []
    annotators: dict[str, AltAnnotator] = {}


class AltTest(_Open):
    """The alternative annotator test of one judge on one task (Calderon et al.)."""

    epsilon: float | None = None
    q: float | None = None
    scale: str | None = None
    scoring: str | None = None
    skipped: str | None = None
    environments: dict[str, AltEnvironment] = {}


class PanelMember(_Open):
    failures: int | None = None
    results: MethodResults = {}


class PanelVote(PanelMember):
    vote: str | None = None
    quorum: int | None = None


class Alpha(_Open):
    value: float | None = None
    n_items: int | None = None


class ErrorCorrelation(_Open):
    n_judges: int | None = None
    mean: float | None = Field(default=None, description="mean pairwise correlation of the judges' errors")
    effective_judges: float | None = None
    pairs: dict[str, float | None] = {}


class PanelTask(_Open):
    members: dict[str, PanelMember] = {}
    panel: PanelVote | None = None
    alpha: Alpha | None = None
    alpha_rank: Alpha | None = None
    error_correlation: ErrorCorrelation | None = None
    #: member -> {delta_<metric>, without_<metric>, alpha, mean_error_correlation, effective_judges},
    #: or why there is none (fewer than 3 members)
    leave_one_out: dict[str, dict[str, float | None]] | str | None = None
    n_items: int | None = None
    alt_test: dict[str, AltTest] = {}


class PanelSection(_Open):
    members: list[str] = []
    vote: str | None = None
    quorum: int | None = None
    tasks: dict[str, PanelTask] = {}


class Incomplete(_Open):
    reason: str
    signal: str | None = Field(
        default=None, description="the stop signal that ended the run (SIGINT, SIGTERM, SIGHUP)"
    )
    stopped_at: JSONObject = {}
    n_items_total: int
    n_items_scored: int
    n_items_unscored: int
    by_task: dict[str, dict[str, int]] = {}
    resume: str | None = None


class Results(_Open):
    """The results document of one ``harness run`` (``results.json``)."""

    model_config = ConfigDict(extra="allow", title="DialevalResults")

    schema_version: str
    run: RunInfo
    harness: HarnessInfo
    judge: JudgeInfo
    datasets: dict[str, DatasetInfo]
    tasks: dict[str, TaskInfo]
    results: dict[str, TaskResults]
    parse_failures: dict[str, int]
    label_parse_failures: dict[str, dict[str, int]] = {}
    usage: dict[str, Any] = {}  # the backend's counters: their shape is the backend's
    cache: CacheInfo = CacheInfo()
    timings: Timings = Timings()
    environment: JSONObject = {}
    executor: JSONObject | None = None
    samples: SamplesInfo
    human_labels: dict[str, JSONObject] = {}
    alt_test: dict[str, AltTest] = {}
    panel: PanelSection | None = None
    incomplete: Incomplete | None = None
    migrated_from: str | None = Field(
        default=None, description="the schema version of the file read, if older"
    )

    @model_validator(mode="after")
    def _keys_are_labels(self) -> Results:
        """A language's entries are keyed by their key's label (a reader looks them up by key)."""
        for task, by_lang in self.results.items():
            for lang, entries in by_lang.items():
                for label, entry in entries.items():
                    if label != entry.key.label:
                        raise ValueError(
                            f"results.{task}.{lang}: entry {label!r} has the key of {entry.key.label!r} "
                            f"(metric, level, group, params); key entries by MetricKey.label"
                        )
        return self

    def task_results(self, task: str) -> TaskResults:
        return self.results.get(task) or {}

    def entry(self, task: str, language: str, key: MetricKey) -> KeyedEntry | None:
        """The entry of ``key`` for ``task`` in ``language`` (or ``"all"``), or None."""
        return find(self.task_results(task).get(language), key)

    def meta_metric_names(self, task: str) -> list[str]:
        """The meta-metrics the run computed for ``task`` (older runs: their correlation methods)."""
        info = self.tasks.get(task) or TaskInfo()
        return list(info.meta_metrics or info.metrics or ["pearson", "spearman"])

    def table_metrics(self, task: str) -> list[MetaMetric]:
        """The metrics that are columns of ``task``'s per-language table, with their declarations
        (header, direction, range) from the registry, in the order the run computed them."""
        from harness.meta.registry import table_metrics  # the registry loads the plug-ins: on demand

        return table_metrics(self.meta_metric_names(task))

    def headline_metric(self, task: str) -> str:
        metrics = (self.tasks.get(task) or TaskInfo()).metrics or ["spearman"]
        return "spearman" if "spearman" in metrics else metrics[0]

    def to_json_dict(self) -> JSONObject:
        return self.model_dump(mode="json", exclude_none=False)


class ResultsError(ValueError):
    """A results.json that cannot be read: names the file and the field."""


def first_error(exc: ValidationError) -> str:
    """``field 'a.b': message (and N more)``: the first error of a validation, for error messages."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "<document>"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"field {loc!r}: {err['msg']}{more}"


def validate_results(doc: Mapping[str, object], where: str = "results") -> Results:
    """The :class:`Results` of a document at the current schema; :class:`ResultsError` otherwise."""
    try:
        return Results.model_validate(doc)
    except ValidationError as e:
        raise ResultsError(
            f"{where}: not a valid results document (schema {SCHEMA_VERSION}): {first_error(e)}"
        ) from None


def samples_info(path: Path) -> JSONObject:
    """The ``samples`` section for a samples.parquet (row count from its metadata)."""
    try:
        meta = pq.ParquetFile(path).metadata
    except (OSError, ValueError):
        return {"file": path.name, "rows": None, "row_groups": None, "format": "parquet"}
    return {"file": path.name, "rows": meta.num_rows, "row_groups": meta.num_row_groups, "format": "parquet"}


def rekey_results(results: object) -> object:
    """``results`` of a document before 3.0 (task → language → name → entry) keyed by structure:
    each name (``"system/spearman"``) becomes its :class:`MetricKey`
    (:func:`harness.meta.builtin.legacy_key`), its fields added to the entry, the entry keyed by the
    key's label; the statistics as they were. What is not a mapping is left for validation to name."""
    from harness.meta.builtin import legacy_key

    if not isinstance(results, dict):
        return results
    out: dict[str, object] = {}
    for task, by_lang in results.items():
        if not isinstance(by_lang, dict):
            out[task] = by_lang
            continue
        langs: dict[str, object] = {}
        for lang, entries in by_lang.items():
            if not isinstance(entries, dict):
                langs[lang] = entries
                continue
            keyed: dict[str, object] = {}
            for name, entry in entries.items():
                key = legacy_key(str(name))
                fields = key.model_dump(mode="json")
                keyed[key.label] = {**entry, **fields} if isinstance(entry, dict) else entry
            langs[lang] = keyed
        out[task] = langs
    return out


def migrate(doc: dict[str, object], directory: Path | None = None) -> dict[str, object]:
    """An older document at the current schema, marked ``migrated_from``: its ``results`` keyed by
    structure (:func:`rekey_results`, 1.x and 2.x); a 1.x one also gets the sections 1.0 / 1.1 may
    lack as their empty values, and its ``samples`` section is read from
    ``directory/samples.parquet`` (row count: ``run.n_items`` when the file is absent); the fields
    2.1 added have defaults. A document at the current schema (or one this harness cannot read)
    is returned as it is."""
    version = str(doc.get("schema_version", ""))
    major = version.split(".")[0]
    if version == SCHEMA_VERSION or major not in READABLE_MAJORS or major == SCHEMA_VERSION.split(".")[0]:
        return doc
    if major != "1":  # an older 2.x
        return {
            **doc,
            "results": rekey_results(doc.get("results")),
            "schema_version": SCHEMA_VERSION,
            "migrated_from": version,
        }
    out = dict(doc)
    out["schema_version"] = SCHEMA_VERSION
    out["migrated_from"] = version
    run_in = out.get("run")
    run: dict[str, object] = dict(run_in) if isinstance(run_in, dict) else {}
    run.setdefault("id", directory.name if directory is not None else "unknown")
    out["run"] = run
    out.setdefault("harness", {})
    judge = out.get("judge")
    out["judge"] = {"spec": "?", **(judge if isinstance(judge, dict) else {})}
    for key in ("datasets", "tasks", "results", "parse_failures", "label_parse_failures"):
        out[key] = out.get(key) or {}
    out["results"] = rekey_results(out["results"])
    sp = directory / SAMPLES_FILE if directory is not None else None
    if sp is not None and sp.is_file():
        out["samples"] = samples_info(sp)
    else:
        out["samples"] = {
            "file": SAMPLES_FILE,
            "rows": run.get("n_items"),
            "row_groups": None,
            "format": "parquet",
        }
    return out


def load_results(path: str | Path) -> Results:
    """The typed results of a run directory (or its results.json): read, migrated from 1.x when
    older, validated. Errors name the file: not JSON, an unreadable schema version, a bad field."""
    p = Path(path)
    if p.is_dir():
        p = p / RESULTS_FILE
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ResultsError(f"{p}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{p}: a results document is a JSON object, got {type(data).__name__}")
    ver = str(data.get("schema_version", ""))
    if ver.split(".")[0] not in READABLE_MAJORS:
        raise ResultsError(
            f"{p}: results schema version {ver!r} is not readable by this harness ({SCHEMA_VERSION}; "
            f"it reads {', '.join(m + '.x' for m in READABLE_MAJORS)})"
        )
    return validate_results(migrate(data, p.parent), str(p))


# -- JSON Schemas --------------------------------------------------------------------------------
SCHEMA_FILES = {"results": "results.schema.json", "sample": "sample.schema.json", "item": "item.schema.json"}


def json_schemas() -> dict[str, JSONObject]:
    """The JSON Schemas (draft 2020-12) of the results document, a sample row and an item."""
    results = Results.model_json_schema()
    results["$id"] = "https://dialeval-harness/schemas/results.schema.json"
    results["description"] = f"results.json of `harness run`, schema version {SCHEMA_VERSION}."
    sample = SampleRow.model_json_schema()
    sample["$id"] = "https://dialeval-harness/schemas/sample.schema.json"
    item = TypeAdapter(TurnItem | DialogueItem).json_schema()
    item["$id"] = "https://dialeval-harness/schemas/item.schema.json"
    item["title"] = "Item"
    item["description"] = "A dataset row judged by `harness run`: a turn-level or a dialogue-level item."
    for s in (results, sample, item):
        s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return {"results": results, "sample": sample, "item": item}


def schema_text(schema: Mapping[str, object]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False, sort_keys=True) + "\n"


def shipped_schema(name: str) -> JSONObject:
    """A JSON Schema shipped with the package (``results``, ``sample`` or ``item``)."""
    schema: JSONObject = json.loads((SCHEMA_DIR / SCHEMA_FILES[name]).read_text(encoding="utf-8"))
    return schema


def write_schemas(directory: Path = SCHEMA_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for name, schema in json_schemas().items():
        path = directory / SCHEMA_FILES[name]
        path.write_text(schema_text(schema), encoding="utf-8")
        out.append(path)
    return out


if __name__ == "__main__":  # python -m harness.run.document: regenerate the shipped schemas
    for written in write_schemas(Path(sys.argv[1]) if len(sys.argv) > 1 else SCHEMA_DIR):
        print(written)
