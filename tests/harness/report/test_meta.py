"""``harness report`` on a panel run with annotator labels: human ceilings, the alt-test (ω per judge
with its verdict, ρ_j per annotator), the panel's α / error correlation / effective judges, figures."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from harness.cli.app import app
from harness.report.meta import alt_rows, human_rows, level_rows, panel_rows, qa_rows
from harness.run.document import AltTest, Results, migrate
from harness.run.runner import RunConfig, run
from tests.fixtures.upheld_source import write_upheld_source


def test_report_sections_for_a_panel_run(tmp_path):
    src = write_upheld_source(tmp_path / "src", n_items=8, n_arena=4)
    rules = tmp_path / "yes.jsonl"
    rules.write_text(json.dumps({"default": {"text": "Yes"}}) + "\n")
    spec = f"panel:replay:{rules}+metric:rouge1+metric:rougeL"
    run(
        RunConfig(
            judge=spec,
            tasks=["upheld-content"],
            source=str(src),
            n_bootstrap=20,
            output_dir=tmp_path / "run",
            show_progress=False,
            use_cache=False,
        )
    )
    r = CliRunner().invoke(app, ["report", str(tmp_path / "run"), "-o", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    md = (tmp_path / "rep" / "report.md").read_text()
    for heading in (
        "## Human ceilings and soft labels",
        "## Can this judge replace an annotator? (alt-test)",
        "## Judge panels",
    ):
        assert heading in md
    assert "effective judges" in md and "metric:rouge1" in md and "annotator_3" in md
    figs = {p.name.split("-")[0] for p in (tmp_path / "rep" / "figures").iterdir()}
    assert {"alt_test_01", "panel_errors_01", "ceilings.png"} <= figs
    assert (tmp_path / "rep" / "report.html").read_text().count("<img") >= 3


def _typed(doc: dict) -> Results:
    """A hand-written (1.x-style, partial) results document as the typed document the report reads."""
    return Results.model_validate(migrate({"schema_version": "1.1", "run": {"id": "r"}, **doc}))


def test_row_builders_on_hand_written_results():
    res = {
        "judge": {"spec": "j"},
        "tasks": {"t": {"metrics": ["pearson", "spearman"]}},
        "human_labels": {"t": {}},
        "results": {
            "t": {
                "en": {
                    "spearman": {"value": 0.5, "ci": [0.4, 0.6]},
                    "ceiling_loao/spearman": {"value": 0.7},
                    "ceiling_split_half/spearman": {"value": 0.9},
                    "soft/expected_abs_error": {"value": 1.2},
                }
            }
        },
    }
    assert human_rows(_typed(res)) == [
        ["t", "en", "0.500 [0.40, 0.60]", "0.700", "0.900", "—", "1.200", "—", "—"]
    ]
    alt = {
        "epsilon": 0.15,
        "scale": "raw",
        "scoring": "neg_rmse",
        "environments": {
            "main/en": {
                "omega": 0.6,
                "rho": 0.7,
                "passed": True,
                "annotators": {
                    "a1": {"n": 40, "rho": 0.8, "p_value": 0.001, "rejected": True},
                    "a2": {"n": 12, "skipped": "12 instances < 30"},
                },
            }
        },
    }
    summary, per = alt_rows(AltTest.model_validate(alt), "t", "j")
    assert summary == [
        ["t", "j", "main/en", "0.60", "0.70", "passes (can replace)", "1 of 2", "0.15", "raw / neg_rmse"]
    ]
    assert per[0][-1] == "yes" and per[1][-1] == "—" and per[1][6] == "12 instances < 30"
    assert (
        alt_rows(AltTest(epsilon=0.1, skipped="1 annotator"), "t", "j")[0][0][5] == "not tested: 1 annotator"
    )
    assert panel_rows(_typed({"judge": {"spec": "j"}, "panel": {"tasks": {}}})) == ([], [])
    lv = {
        "tasks": {"c": {"metrics": ["pearson"], "levels": ["system"]}},
        "results": {
            "c": {
                "en": {"pearson": {"value": 0.1, "n": 9}, "system/pearson": {"value": 0.9, "n": 3}},
                "all": {},
            }
        },
    }
    assert level_rows(_typed({"judge": {"spec": "j"}, **lv})) == [
        ["c", "en", "item", "9", "0.100"],
        ["c", "en", "system", "3", "0.900"],
    ]
    qa = {
        "source_language": "en",
        "languages": {"fr": {"n_segments": 3, "bleu": 40.123, "similarity": 0.8}},
        "average": {"n_segments": 3},
    }
    assert qa_rows(qa)[0][:3] == ["EN-FR", "3", "40.12"] and qa_rows(qa)[1][0] == "Avg"
