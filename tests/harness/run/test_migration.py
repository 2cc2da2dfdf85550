"""Reading results.json files written before schema 3.0: every entry of ``results`` gets its
structured key (metric, level, group, parameters) and keeps every number.

``tests/fixtures/results/v2_1/results.json`` is a 2.1 document whose ``results`` are those the
golden runs wrote before entries were keyed by structure (MEDAL issue detection, pooled
correlations, dialogue- and system-level correlations, soft labels, ceilings, high agreement); the
golden file holds the same runs at the current schema.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from harness.meta.builtin import legacy_key
from harness.meta.metric import Level, MetricKey, select
from harness.run.document import SCHEMA_VERSION, load_results, migrate, shipped_schema
from tests.fixtures.tolerances import FLOAT64_PATHS, float_diffs

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
V21 = FIXTURES / "results" / "v2_1" / "results.json"
GOLDEN = FIXTURES / "golden" / "run_results.json"
KEY_FIELDS = ("metric", "level", "group", "params")


def _statistic(entry: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in entry.items() if k not in KEY_FIELDS}


def test_every_entry_of_a_2_1_file_keeps_its_numbers_under_its_key():
    raw = json.loads(V21.read_text(encoding="utf-8"))
    res = load_results(V21)
    assert res.schema_version == SCHEMA_VERSION and res.migrated_from == "2.1"
    migrated = res.model_dump(mode="json", exclude_unset=True)["results"]
    assert isinstance(migrated, dict)
    n = 0
    for task, by_lang in raw["results"].items():
        assert list(migrated[task]) == list(by_lang)
        for lang, entries in by_lang.items():
            assert len(migrated[task][lang]) == len(entries), (task, lang)
            for name, old in entries.items():
                key = legacy_key(name)
                new = migrated[task][lang][key.label]
                assert {k: new[k] for k in KEY_FIELDS} == key.model_dump(mode="json")
                assert "/" not in key.label
                diffs = float_diffs(old, _statistic(new), tol=FLOAT64_PATHS, where=f"{task}.{lang}.{name}")
                assert not diffs, diffs[:5]
                n += 1
    assert n > 200  # every kind of entry, not a handful


def test_old_names_become_structured_keys():
    res = load_results(V21)
    en = res.task_results("medal")["en"]
    f1 = res.entry(
        "medal", "en", MetricKey(metric="issue_detection", group="repetitive", params={"statistic": "f1_pos"})
    )
    assert f1 is not None and f1.value is not None and f1.per_annotator  # undeclared fields kept
    mcnemar = res.entry(
        "medal", "all", MetricKey(metric="issue_detection", group="macro", params={"statistic": "f1_pos"})
    )
    assert mcnemar is not None and mcnemar.attr("n_dimensions") == 8
    pooled = res.entry("medal", "all", MetricKey(metric="pooled_correlation", params={"method": "spearman"}))
    assert pooled is not None and pooled.ci is not None
    assert {e.params["statistic"] for e in select(en, "soft_labels")} == {
        "expected_abs_error",
        "expected_sq_error",
    }
    assert {
        (e.params["estimator"], e.params["method"]) for e in select(en, "human_ceilings", method="pearson")
    } == {
        ("loao", "pearson"),
        ("split_half", "pearson"),
    }
    system = select(res.task_results("cpdscore-d-noref")["en"], "system_correlation")
    assert {e.params["method"] for e in system} == {"pearson", "spearman", "kendall"}
    assert all(e.level is Level.SYSTEM and e.group is None for e in system)
    plain = res.entry("cpdscore-d-noref", "en", MetricKey(metric="spearman"))
    assert plain is not None and plain.level is Level.ITEM and plain.params == {}


def test_migrated_results_equal_the_golden_runs_at_the_current_schema():
    """The golden file (written by the current code) and the migrated 2.1 file agree entry by entry."""
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    want = {
        "medal": {lang: golden["medal"]["results"]["medal"][lang] for lang in ("en", "all")},
        "cpdscore-d-noref": golden["cpdscore"]["results"]["cpdscore-d-noref"],
    }
    got = load_results(V21).model_dump(mode="json", exclude_unset=True)["results"]
    diffs = float_diffs(want, json.loads(json.dumps(got)), tol=FLOAT64_PATHS, where="results")
    assert not diffs, diffs[:10]


def test_a_migrated_document_is_valid_against_the_published_schema(tmp_path):
    doc = migrate(json.loads(V21.read_text(encoding="utf-8")), V21.parent)
    validator = jsonschema.Draft202012Validator(shipped_schema("results"))
    errors = [e.message[:200] for e in validator.iter_errors(doc)]
    assert not errors, errors[:3]
    assert migrate(doc) is doc  # the current schema reads as it is
    shutil.copy(V21, tmp_path / "results.json")
    assert load_results(tmp_path).results == load_results(V21).results


@pytest.mark.parametrize(
    "name, key",
    [
        ("pearson", MetricKey(metric="pearson")),
        (
            "dialogue/kendall",
            MetricKey(metric="dialogue_correlation", level=Level.DIALOGUE, params={"method": "kendall"}),
        ),
        (
            "unsafe/mcnemar",
            MetricKey(metric="issue_detection", group="unsafe", params={"statistic": "mcnemar"}),
        ),
        ("kendall_pooled", MetricKey(metric="pooled_correlation", params={"method": "kendall"})),
        ("high_agreement/spearman", MetricKey(metric="high_agreement", params={"method": "spearman"})),
        ("soft/cross_entropy", MetricKey(metric="soft_labels", params={"statistic": "cross_entropy"})),
        ("pairwise_accuracy", MetricKey(metric="pairwise_accuracy")),  # a plug-in's own name
    ],
)
def test_legacy_names(name, key):
    assert legacy_key(name) == key
    assert "/" not in key.label
