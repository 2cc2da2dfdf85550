"""CPDScore as ``harness run`` tasks: three seeded calls averaged with parse failures counted, the
turn / dialogue / system correlations of Tables 4–5, CPDS-Dial on turn rows grouped into dialogues
(UPHELD) and on dialogue-level configs (an imported ComperDial), other judge kinds on the same tasks,
and a replay run on the real UPHELD release."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.data.builders import build_dataset
from harness.run.runner import RunConfig, run
from harness.tasks import get_task, validate
from tasks.cpdscore.task import PROTOCOLS, dialogue_turns, group_turns
from tests.fixtures.upheld_source import write_upheld_source

GROUP = [
    "cpdscore-s-ref",
    "cpdscore-s-noref",
    "cpdscore-d-ref",
    "cpdscore-d-noref",
    "cpdscore-dial",
    "cpdscore-dial-intermediate",
    "cpdscore-dial-turns",
    "cpdscore-dial-turns-intermediate",
]


def _rules(path):
    rules = [
        {
            "match": "(?i)overall dialogue",
            "select": "seed",
            "responses": [
                {
                    "text": "Overall Dialogue Turn Score - 3\nDialogue Interaction Score - 4\nFinal Score - 3.5"
                },
                {
                    "text": "Overall Dialogue Turn Score - 4\nDialogue Interaction Score - 2\nFinal Score - 4.5"
                },
                {"text": "Overall Dialogue Turn Score - 2\nDialogue Interaction Score - 2\nFinal: unclear"},
            ],
        },
        # Simple prompts read "overall - x", Detail prompts "- Humanness: x"; calls seeded 0, 1, 2
        {
            "match": "### Response:\n[A-J]",
            "select": "seed",
            "responses": [
                {"text": "humanness - 2\noverall - 2\n- Humanness: 2"},
                {"text": "overall - 3\n- Humanness: 3"},
                {"text": "no idea"},
            ],
        },
        {
            "match": "### Response:\n",
            "select": "seed",
            "responses": [
                {"text": "overall - 5\n- Humanness: 5"},
                {"text": "overall - 4\n- Humanness: 4"},
                {"text": "overall - 9"},
            ],
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rules), encoding="utf-8")
    return f"replay:{path}"


def test_tasks_are_registered_and_valid():
    specs = [get_task(n) for n in GROUP]
    assert validate(specs) == []
    assert set(PROTOCOLS) == set(GROUP)
    t = get_task("cpdscore-d-noref")
    assert (
        t.configs == ("*",)
        and t.levels == ("dialogue", "system")
        and t.procedure
        and t.scorer.score_range() == (1.0, 5.0)
    )
    g = get_task("cpdscore-dial-turns")
    assert g.level == "dialogue" and g.input_level == "turn" and g.prepare and g.levels == ("system",)


def test_turn_task_averages_three_seeded_calls(tmp_path):
    src = write_upheld_source(tmp_path / "src", n_items=6, n_arena=4)
    judge = _rules(tmp_path / "r.jsonl")
    out = run(
        RunConfig(
            judge=judge,
            tasks=["cpdscore-s-noref"],
            source=str(src),
            output_dir=tmp_path / "o",
            n_bootstrap=0,
            show_progress=False,
            use_cache=False,
        )
    )
    s, res = out.samples, out.results
    assert res["usage"]["backend"]["requests"] == 3 * len(s)  # three calls per item
    extra = [json.loads(x) for x in s["extra"]]
    for resp, score, e in zip(s["raw_output"], s["score"], extra, strict=True):
        assert e["seeds"] == [0, 1, 2] and len(e["calls"]) == 3
        if "[call 1] humanness - 2" in resp:
            assert score == pytest.approx(2.5) and e["calls"][2] is None  # "no idea": counted, not 0
        else:
            assert score == pytest.approx(4.5) and e["calls"][2] is None  # "overall - 9": out of range
    r = res["results"]["cpdscore-s-noref"]
    assert {"dialogue_correlation(spearman)", "system_correlation(kendall)", "pearson"} <= set(r["en"])
    assert (
        r["en"]["system_correlation(pearson)"]["n"] == 6
        and r["en"]["dialogue_correlation(pearson)"]["per_dataset"]["main"]["n"] == 6 * 6
    )
    assert res["alt_test"]["cpdscore-s-noref"]["scale"] == "raw"  # 1-5 judge on 1-5 content labels
    assert "human_ceilings(split_half,spearman)" in r["all"]
    # the spec option n_calls changes the number of calls
    out = run(
        RunConfig(
            judge=judge + ",n_calls=2",
            tasks=["cpdscore-s-noref"],
            source=str(src),
            n_bootstrap=0,
            output_dir=tmp_path / "o2",
            show_progress=False,
            use_cache=False,
            limit=5,
        )
    )
    assert out.results["usage"]["backend"]["requests"] == 2 * len(out.samples)


def test_dial_over_grouped_turns(tmp_path):
    src = write_upheld_source(tmp_path / "src", n_items=4, n_arena=3)
    out = run(
        RunConfig(
            judge=_rules(tmp_path / "r.jsonl"),
            tasks=["cpdscore-dial-turns", "cpdscore-dial-turns-intermediate"],
            source=str(src),
            output_dir=tmp_path / "o",
            n_bootstrap=0,
            show_progress=False,
        )
    )
    s = out.samples
    final = s[s["task"] == "cpdscore-dial-turns"]
    # main: 4 dialogues x 6 systems; llm_arena: one dialogue per item (no system)
    assert len(final[final["dataset"] == "main"]) == 4 * 6
    assert final["score"].dropna().tolist() == pytest.approx(
        [4.0] * final["score"].notna().sum()
    )  # mean(3.5, 4.5)
    inter = s[s["task"] == "cpdscore-dial-turns-intermediate"]
    assert inter["score"].dropna().tolist() == pytest.approx(
        [3.0] * inter["score"].notna().sum()
    )  # mean(3, 4, 2)
    assert out.results["cache"]["hits"] > 0  # the intermediate task reuses the same calls
    e = json.loads(final["extra"].iloc[0])
    assert e["step1"] == "cpds-d-noref" and e["n_turns"] >= 1 and e["finals"][2] is None
    assert "system_correlation(spearman)" in out.results["results"]["cpdscore-dial-turns"]["en"]


def test_group_turns_and_dialogue_turns():
    task = get_task("cpdscore-dial-turns")
    rows = [
        {
            "id": f"{d}-{t}::s",
            "dataset": "x",
            "language": "en",
            "dialogue_id": d,
            "system": "s",
            "rating": r,
            "context": [{"role": "user", "text": "hi"}],
            "response": f"r{t}",
            "dimension": "content",
        }
        for d, t, r in (("a", 1, 2.0), ("a", 2, 4.0), ("b", 1, 5.0))
    ]
    items = group_turns(task, rows)
    assert [(i["id"], len(i["turn_records"]), i["rating"]) for i in items] == [
        ("a::s", 2, 3.0),
        ("b::s", 1, 5.0),
    ]
    with pytest.raises(ValueError, match="no dialogue_id"):
        group_turns(task, [{**rows[0], "dialogue_id": None}])
    item = {
        "id": "d",
        "turns": [
            {"role": "user", "text": "hi"},
            {"role": "assistant", "text": "hello"},
            {"role": "user", "text": "x"},
            {"role": "assistant", "text": " "},
        ],
    }
    assert [(t["response"], len(t["context"])) for t in dialogue_turns(item)] == [("hello", 1)]


CD_TURN = [
    {
        "dialogue_id": f"d{d}",
        "turn_id": t,
        "model_name": m,
        "persona": ["I like tea."],
        "context": ["Hi!", "Hello.", f"Question {t}?"][: 1 + 2 * (t > 0)],
        "response": f"{'Answer' if m == 'good' else 'Zzz'} {d}{t}",
        "gold_response": "A gold answer.",
        "score": [4 if m == "good" else 2, 5 if m == "good" else 1],
    }
    for d in range(3)
    for t in range(2)
    for m in ("good", "bad", "meh")
]
CD_DIAL = [
    {
        "dialogue_id": f"d{d}",
        "model_name": m,
        "persona": ["I like tea."],
        "score": [4, 5] if m == "good" else [2, 2],
        "dialogue": [
            {"speaker": "A", "text": "Hi!"},
            {"speaker": "B", "text": f"Hello {m}."},
            {"speaker": "A", "text": "How are you?"},
            {"speaker": "B", "text": f"Fine {d}."},
        ],
    }
    for d in range(3)
    for m in ("good", "bad", "meh")
]


def test_imported_comperdial_turn_and_dialogue_tasks(tmp_path):
    src = tmp_path / "cd"
    src.mkdir()
    (src / "ComperDial_turn_level_evaluation.json").write_text(json.dumps(CD_TURN))
    (src / "ComperDial_dialogue_level_evaluation.json").write_text(json.dumps(CD_DIAL))
    ds = tmp_path / "comperdial"
    build_dataset("import", str(src), ds, show_progress=False, mapping="comperdial")
    judge = _rules(tmp_path / "r.jsonl")
    out = run(
        RunConfig(
            judge=judge,
            tasks=["cpdscore-d-ref", "cpdscore-dial"],
            dataset=str(ds),
            output_dir=tmp_path / "o",
            n_bootstrap=0,
            show_progress=False,
        )
    )
    s = out.samples
    turn, dial = s[s["task"] == "cpdscore-d-ref"], s[s["task"] == "cpdscore-dial"]
    assert set(turn["dataset"]) == {"comperdial-turn"} and len(turn) == len(CD_TURN)
    assert set(dial["dataset"]) == {"comperdial-dial"} and len(dial) == len(CD_DIAL)
    assert turn["human_dimension"].eq("overall").all()  # ComperDial has the task's dimension
    assert json.loads(dial["extra"].iloc[0])["n_turns"] == 2  # both "B" turns scored in step 1
    res = out.results
    assert res["results"]["cpdscore-dial"]["en"]["system_correlation(spearman)"]["n"] == 3
    assert res["alt_test"]["cpdscore-d-ref"]["environments"]["comperdial-turn/en"]["skipped"]  # 18 items < 30
    # a non-LLM judge runs the same task its own way
    out = run(
        RunConfig(
            judge="metric:rougeL",
            tasks=["cpdscore-d-ref"],
            dataset=str(ds),
            output_dir=tmp_path / "m",
            n_bootstrap=0,
            show_progress=False,
        )
    )
    assert out.samples["score"].notna().all()


def test_a_dataset_without_rows_at_the_task_level_is_a_clear_error(tmp_path):
    src = tmp_path / "cd"
    src.mkdir()
    (src / "ComperDial_dialogue_level_evaluation.json").write_text(json.dumps(CD_DIAL))
    ds = tmp_path / "comperdial"
    build_dataset("import", str(src), ds, show_progress=False, mapping="comperdial")
    r = CliRunner().invoke(
        app,
        [
            "run",
            "--task",
            "cpdscore-d-noref",
            "--judge",
            _rules(tmp_path / "r.jsonl"),
            "--dataset",
            str(ds),
            "-q",
            "-o",
            str(tmp_path / "o"),
        ],
    )
    assert r.exit_code == 2 and "reads turn-level rows" in r.output


@pytest.mark.shared_data
def test_cli_on_real_upheld(shared_data, tmp_path):
    src = shared_data / "upheld"
    if not src.is_dir():
        pytest.skip("UPHELD not in ../shared/data")
    judge = _rules(tmp_path / "r.jsonl")
    r = CliRunner().invoke(
        app,
        [
            "run",
            "--task",
            "cpdscore-d-noref",
            "--judge",
            judge,
            "--source",
            str(src),
            "--limit",
            "40",
            "--bootstrap",
            "0",
            "-q",
            "-o",
            str(tmp_path / "o"),
        ],
    )
    assert r.exit_code == 0, r.output
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    en = res["results"]["cpdscore-d-noref"]["en"]
    assert en["pearson"]["n"] == 80 and en["system_correlation(pearson)"]["per_dataset"]["main"]["n"] == 6
    assert "alt-test: winning rate" in r.output and "human ceilings" in r.output
    assert "turn / dialogue / system level" in r.output
