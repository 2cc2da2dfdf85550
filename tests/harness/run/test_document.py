"""Typed records: the results document, sample rows and items as pydantic models,
their shipped JSON Schemas, validation on write and read, the typed reader and the 1.x migration."""

from __future__ import annotations

import importlib.resources
import json
import math
from pathlib import Path

import jsonschema
import pandas as pd
import pytest

import harness.run
from harness.run.document import (
    SCHEMA_FILES,
    SCHEMA_VERSION,
    Results,
    ResultsError,
    json_schemas,
    load_results,
    schema_text,
    shipped_schema,
)
from harness.run.records import ItemError, SampleError, SampleRow, check_item, check_sample_row
from harness.run.results import SAMPLE_SCHEMA, write_results_json
from harness.run.runner import RunConfig, run
from harness.run.samples import iter_samples
from tests.fixtures.results.schema import INVALID_DIR

ROOT = Path(__file__).resolve().parents[3]


def test_shipped_json_schemas_are_the_models():
    """The files in harness/run/schemas/ are what the models generate (regenerate them with
    ``python -m harness.run.document`` after changing a model), and they ship as package data."""
    for name, schema in json_schemas().items():
        shipped = importlib.resources.files("harness.run") / "schemas" / SCHEMA_FILES[name]
        assert shipped.is_file(), shipped
        assert shipped.read_text(encoding="utf-8") == schema_text(schema), (
            f"{SCHEMA_FILES[name]} differs from the models: run python -m harness.run.document"
        )
        jsonschema.Draft202012Validator.check_schema(schema)
    assert '"harness.run" = ["schemas/*.json"]' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert list(SampleRow.model_fields) == SAMPLE_SCHEMA.names  # the model is the Parquet file's columns


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("typed")
    rules = tmp / "judge.jsonl"
    rules.write_text(
        json.dumps({"match": "lemon|limón|Zitrone", "response": {"text": "Maybe"}})
        + "\n"
        + json.dumps({"default": {"hashed_p_yes": True}})
        + "\n"
    )
    out = run(
        RunConfig(
            judge=f"replay:{rules}",
            tasks=["demo-turn"],
            n_bootstrap=50,
            output_dir=tmp / "run",
            show_progress=False,
            use_cache=False,
        )
    )
    return out


def test_a_run_writes_a_document_the_schema_and_the_typed_reader_accept(demo_run):
    d = demo_run.output_dir
    raw = json.loads((d / "results.json").read_text())
    jsonschema.validate(raw, shipped_schema("results"))
    res = harness.run.load_results(d)  # the public reader, from the package
    assert isinstance(res, Results) and res == demo_run.document
    assert res.schema_version == SCHEMA_VERSION and res.migrated_from is None
    assert res.samples.rows == res.run.n_items == 160 and res.samples.row_groups >= 1
    en = res.results["demo-turn"]["en"]["pearson"]
    assert en.n == 15 and en.parse_failures == 1 and isinstance(en.per_dataset["demo-turn"].p_value, float)
    assert res.headline_metric("demo-turn") == "spearman" and res.timings.samples_io_s >= 0
    rows = list(harness.run.iter_samples(d))
    assert len(rows) == 160 and all(isinstance(r, SampleRow) for r in rows)
    failed = [r for r in rows if r.parse_status != "ok"]
    assert len(failed) == 3 and all(r.score is None and r.raw_output == "Maybe" for r in failed)
    sample_schema = jsonschema.Draft202012Validator(shipped_schema("sample"))
    assert all(sample_schema.is_valid(r.model_dump()) for r in rows[:20])


def test_old_1x_files_are_read_through_the_migration(demo_run, tmp_path):
    """A 1.1 document (as harness runs wrote before 2.0) and a minimal 1.0 one are read: sections
    they lack get empty values, ``samples`` comes from the samples.parquet beside them."""
    raw = json.loads((demo_run.output_dir / "results.json").read_text())
    old = {k: v for k, v in raw.items() if k != "samples"} | {"schema_version": "1.1"}
    old["timings"].pop("samples_io_s")
    (tmp_path / "v11").mkdir()
    (tmp_path / "v11" / "results.json").write_text(json.dumps(old))
    pd.read_parquet(demo_run.output_dir / "samples.parquet").to_parquet(tmp_path / "v11" / "samples.parquet")
    res = load_results(tmp_path / "v11")
    assert res.migrated_from == "1.1" and res.schema_version == SCHEMA_VERSION
    assert res.samples.rows == 160 and res.results == demo_run.document.results
    minimal = {"schema_version": "1.0", "run": {"id": "r1"}, "judge": {"spec": "embed:x"}, "results": {}}
    (tmp_path / "v10").mkdir()
    (tmp_path / "v10" / "results.json").write_text(json.dumps(minimal))
    res = load_results(tmp_path / "v10" / "results.json")
    assert res.run.id == "r1" and res.datasets == {} and res.samples.rows is None and res.panel is None


def test_2_0_files_are_read_and_show_their_correlations(demo_run, tmp_path):
    """A 2.0 document (written before meta-metrics were recorded: no ``meta_metrics``, the evaluate
    folder under ``evaluate_module``) reads at the current schema, and its tables show the
    correlations it names under ``metrics``, with the registry's headers."""
    from harness.run.results import results_tables

    raw = json.loads((demo_run.output_dir / "results.json").read_text())
    old = json.loads(json.dumps(raw)) | {"schema_version": "2.0"}
    for info in old["tasks"].values():
        info.pop("meta_metrics")
        info["evaluate_module"] = info.pop("evaluate_dir", None)
    (tmp_path / "v20").mkdir()
    (tmp_path / "v20" / "results.json").write_text(json.dumps(old))
    res = load_results(tmp_path / "v20")
    assert res.migrated_from == "2.0" and res.schema_version == SCHEMA_VERSION
    assert res.results == demo_run.document.results
    assert res.meta_metric_names("demo-turn") == ["pearson", "spearman"]
    assert [m.header() for m in res.table_metrics("demo-turn")] == ["Pearson", "Spearman"]
    (table,) = results_tables(res)
    assert [c.header for c in table.columns][3:5] == ["Pearson [95% CI]", "Spearman [95% CI]"]


@pytest.mark.parametrize(
    "doc, match",
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "a JSON object"),
        (
            json.dumps({"schema_version": "4.0", "results": {}}),
            r"schema version '4.0' is not readable.*1\.x, 2\.x, 3\.x",
        ),
        (
            json.dumps(
                {
                    "schema_version": "1.1",
                    "run": {"id": "r"},
                    "judge": {"spec": "j"},
                    "results": {"t": {"en": {"pearson": {"value": "high"}}}},
                }
            ),
            r"field 'results\.t\.en\.pearson\.value'",
        ),
        (
            json.dumps(
                {
                    "schema_version": "3.0",
                    "run": {"id": "r"},
                    "harness": {},
                    "judge": {"spec": "j"},
                    "datasets": {},
                    "tasks": {},
                    "parse_failures": {},
                    "samples": {},
                    "results": {"t": {"en": {"system/spearman": {"metric": "spearman", "value": 0.5}}}},
                }
            ),
            r"entry 'system/spearman' has the key of 'spearman'",
        ),
        (json.dumps({"schema_version": "2.0", "run": {"id": "r"}}), r"field '\w+': Field required"),
    ],
)
def test_unreadable_documents_are_clear_errors(tmp_path, doc, match):
    d = tmp_path / INVALID_DIR  # left out of the session's schema check (tests/fixtures/results/schema.py)
    d.mkdir()
    (d / "results.json").write_text(doc)
    with pytest.raises(ResultsError, match=match) as ei:
        load_results(d)
    assert str(d / "results.json") in str(ei.value)


def test_an_invalid_document_is_never_written(demo_run, tmp_path):
    raw = json.loads((demo_run.output_dir / "results.json").read_text())
    raw["results"]["demo-turn"]["en"]["pearson"]["n"] = "fifteen"
    with pytest.raises(ResultsError, match=r"results\.json: .*field 'results\.demo-turn\.en\.pearson\.n'"):
        write_results_json(tmp_path, raw)
    assert not (tmp_path / "results.json").exists()
    raw["results"]["demo-turn"]["en"]["pearson"]["n"] = 15
    raw["results"]["demo-turn"]["en"]["pearson"]["value"] = math.nan  # written as null
    write_results_json(tmp_path, raw)
    assert load_results(tmp_path).results["demo-turn"]["en"]["pearson"].value is None


def test_sample_rows_are_checked_on_write_and_read(demo_run, tmp_path):
    good = next(iter(iter_samples(demo_run.output_dir))).model_dump()
    check_sample_row(good | {"score": math.nan})  # NaN is a missing score
    for bad, field in (
        (good | {"score": math.inf}, "score"),
        (good | {"extra": "{not json"}, "extra"),
        (good | {"human_labels": "[1, 2]"}, "human_labels"),
        (good | {"prompt_tokens": -1}, "prompt_tokens"),
        (good | {"surprise": 1}, "surprise"),
    ):
        with pytest.raises(SampleError, match=rf"item '{good['id']}': field '{field}'"):
            check_sample_row(bad)
    pd.DataFrame({"a": [1]}).to_parquet(tmp_path / "samples.parquet")
    with pytest.raises(SampleError, match="not a samples file"):
        next(iter(iter_samples(tmp_path)))


def test_items_are_checked_on_read():
    ok = {
        "id": "x-en",
        "item_id": "x",
        "dataset": "d",
        "language": "en",
        "context": [{"role": "user", "text": "hi"}],
        "response": "hello",
        "dimension": "relevance",
        "persona": "extra columns of a builder are kept",
    }
    check_item(ok, "turn", "DIR config 'd'", 1)
    with pytest.raises(
        ItemError, match=r"DIR config 'd', row 7 \(id 'x-en'\), field 'response': .*empty response"
    ):
        check_item(ok | {"response": "  "}, "turn", "DIR config 'd'", 7)
    with pytest.raises(ItemError, match=r"field 'context\.0\.role'"):
        check_item(ok | {"context": [{"role": "bot", "text": "hi"}]}, "turn", "DIR config 'd'", 1)
    with pytest.raises(ItemError, match=r"field 'turns'"):
        check_item(ok, "dialogue", "DIR config 'd'", 1)
