"""MEDAL task end to end: Table 11 prompt, JSON verdicts through the replay backend (valid,
malformed, out of range, missing keys, words, reasoning traces) and a tiny random hf model,
issue-detection meta-metrics in results.json, the evaluate module and `harness stability`."""

import json
import re
from pathlib import Path

import evaluate
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import f1_score
from typer.testing import CliRunner

from dataset_builders.medal_labels import MEDAL_ISSUES, MEDAL_OVERALL_KEY
from harness.cli import app
from harness.judges import load_judge
from harness.run.runner import RunConfig, run
from harness.tasks import get_task, validate
from tests.fixtures.medal_source import medal_records, write_medal_source

REPO = Path(__file__).resolve().parents[3]
LABELS = (*MEDAL_ISSUES, "other")


def conv(rec):
    return "\n".join(f"{t['role']}: {t['text']}" for t in rec["turns"])


def human(rec, annotator_index=0):
    anns = sorted({lab["annotator"] for lab in rec["labels"]})
    ann = anns[min(annotator_index, len(anns) - 1)]
    return {lab["dimension"]: lab["value"] for lab in rec["labels"] if lab["annotator"] == ann}


def verdict_text(labels, overall):
    obj = {d: {"label": labels.get(d, 0), "comment": ""} for d in LABELS}
    obj[MEDAL_OVERALL_KEY] = {"label": overall, "comment": "ok"}
    return json.dumps(obj)


def make_replay(path: Path, records):
    """One rule per distinct conversation; the first five exercise the parser's failure paths."""
    convs = list(dict.fromkeys(conv(r) for r in records))
    first = {c: next(r for r in records if conv(r) == c) for c in convs}
    rules = []
    for i, c in enumerate(convs):
        h = human(first[c])
        labels = {d: int(h.get(d, 0)) for d in MEDAL_ISSUES}
        if i % 3 == 2:  # the judge misses an issue now and then
            labels["repetitive"] = 1 - labels["repetitive"]
        if i == 0:
            text = '{"uninterpretable": {"label": 0, "comment": ""}, "unsafe": {"label": 0,}'  # malformed
        elif i == 1:
            text = verdict_text(labels, 7)  # overall out of range
        elif i == 2:
            obj = json.loads(verdict_text(labels, 4))
            del obj["nonfactual"]
            obj["unsafe"]["label"] = 2
            text = json.dumps(obj)
        elif i == 3:
            obj = json.loads(verdict_text(labels, "four"))
            obj["repetitive"]["label"] = "yes" if labels["repetitive"] else "no"
            text = "Evaluation:\n" + json.dumps(obj)
        elif i == 4:
            text = (
                "<think>Let me check each turn {carefully}.</think>\n```json\n"
                + verdict_text(labels, 2)
                + "\n```"
            )
        else:
            text = verdict_text(labels, int(round(h.get("overall", 3))))
        rules.append({"match": re.escape(c) + r"\Z", "response": {"text": text}})
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rules), encoding="utf-8")
    n = {i: sum(conv(r) == convs[i] for r in records) for i in range(min(5, len(convs)))}
    return path, n


@pytest.fixture
def medal_src(tmp_path):
    return write_medal_source(tmp_path / "medal-src")


def test_medal_task_definition_is_valid_and_verbatim():
    spec = get_task("medal")
    assert [p for p in validate([spec], repo_root=REPO)] == []
    tpl = spec.template_for("zh")
    assert tpl.source.startswith("MEDAL") and len(tpl.hash) == 16
    msgs = tpl.render(
        spec.fields({"turns": [{"role": "user", "text": "Hi"}, {"role": "assistant", "text": "Yo"}]})
    )
    assert msgs[0].role == "system" and msgs[1].content == "user: Hi\nassistant: Yo"
    for phrase in (
        '"overall_quality_rating": { "label": 1-5, "comment": "" }',
        'The "assistant" is just a name and has no role attached to it',
        "**5 – Very good** (Consistently appropriate, coherent, natural)",
    ):
        assert phrase in msgs[0].content
    g = spec.generation
    assert (g.temperature, g.top_p, g.max_tokens, spec.reasoning_max_tokens) == (0.0, 1.0, 8192, 32768)
    req = spec.build_request({"language": "en", "turns": [{"role": "user", "text": "Hi"}]})
    assert req.json_schema["required"] == [*LABELS, MEDAL_OVERALL_KEY]


def test_reasoning_judges_get_the_larger_budget(tmp_path):
    spec = get_task("medal")
    rp = tmp_path / "r.jsonl"
    rp.write_text(json.dumps({"default": {"text": "{}"}}))
    budgets = {}
    for opts in ("", ",reasoning=true", ",reasoning=true,max_tokens=100"):
        j = load_judge(f"replay:{rp}{opts}")
        budgets[opts] = j.generation_config(spec).max_tokens
    assert budgets == {"": 8192, ",reasoning=true": 32768, ",reasoning=true,max_tokens=100": 100}


def test_medal_run_with_replay_judge(tmp_path, medal_src):
    records = medal_records()
    replay, n = make_replay(tmp_path / "medal.jsonl", records)
    out = run(
        RunConfig(
            judge=f"replay:{replay}",
            tasks=["medal"],
            source=str(medal_src),
            n_bootstrap=50,
            output_dir=tmp_path / "run",
            show_progress=False,
            use_cache=False,
        )
    )
    res = out.results
    assert res["schema_version"] == "3.0" and res["run"]["n_items"] == len(records)
    # malformed JSON and an out-of-range overall are parse failures; the others keep their overall
    assert res["parse_failures"]["medal"] == n[0] + n[1]
    lpf = res["label_parse_failures"]["medal"]
    assert lpf["nonfactual"] == n[0] + n[2] and lpf["unsafe"] == n[0] + n[2] and lpf["repetitive"] == n[0]
    s = out.samples
    assert s["score"].isna().sum() == n[0] + n[1]
    assert set(s["system"]) == {"bot-a", "bot-b"}
    words = s[s["raw_output"].str.startswith("Evaluation:")]
    assert len(words) == n[3] and (words["score"] == 4.0).all()
    # issue metrics per language and pooled ("all"), equal to sklearn over each annotation set
    r = res["results"]["medal"]
    assert {"en", "zh", "de", "all"} <= set(r)
    assert {"pearson", "spearman", "pooled_correlation(pearson)", "pooled_correlation(spearman)"} <= set(
        r["all"]
    )
    judge = [json.loads(x)["repetitive"] if isinstance(x, str) else None for x in s["judge_labels"]]
    hum = [json.loads(x)["repetitive"] for x in s["human_labels"]]
    per_slot = []
    for slot in (0, 1):
        pairs = [
            (list(h.values())[slot], j)
            for h, j in zip(hum, judge, strict=True)
            if j is not None and len(h) > slot and list(h.values())[slot] is not None
        ]
        yt, yp = zip(*pairs, strict=True)
        per_slot.append(f1_score(yt, yp, pos_label=1, zero_division=0))
    assert r["all"]["issue_detection(repetitive,f1_pos)"]["value"] == pytest.approx(
        np.mean(per_slot), abs=1e-12
    )
    assert (
        r["all"]["issue_detection(repetitive,human_ceiling)"]["value"] is not None
    )  # en and zh have two annotators
    assert r["de"]["issue_detection(repetitive,human_ceiling)"]["value"] is None  # de has one
    assert r["all"]["issue_detection(repetitive,mcnemar)"]["kind"] == "correctness"
    assert 0 <= r["all"]["issue_detection(macro,f1_neg)"]["value"] <= 1
    # samples keep the raw text and the per-field reasons
    bad = s[s["raw_output"].str.contains('"unsafe": {"label": 2', regex=False)]
    assert len(bad) == n[2] and "unsafe" in json.loads(bad["extra"].iloc[0])["label_errors"]
    saved = pd.read_parquet(out.output_dir / "samples.parquet")
    assert {"system", "human_labels", "judge_labels"} <= set(saved.columns)


def test_medal_run_with_tiny_hf_model_counts_failures(tmp_path, medal_src, tiny_qwen2):
    out = run(
        RunConfig(
            judge=f"hf:{tiny_qwen2},max_tokens=12,max_length=2000",
            tasks=["medal"],
            source=str(medal_src),
            languages=["en"],
            limit=3,
            n_bootstrap=0,
            output_dir=tmp_path / "hf",
            show_progress=False,
            use_cache=False,
        )
    )
    s = out.samples
    assert len(s) == 3 and s["score"].isna().all() and (s["parse_status"] == "parse_error").all()
    assert out.results["parse_failures"]["medal"] == 3
    assert out.results["label_parse_failures"]["medal"]["unsafe"] == 3
    assert out.results["results"]["medal"]["all"]["issue_detection(unsafe,f1_pos)"]["parse_failures"] == 3


def test_medal_evaluate_module(tmp_path):
    records = medal_records(languages=("en",), n_per_pair=4)
    replay, _ = make_replay(tmp_path / "m.jsonl", records)
    m = evaluate.load(str(REPO / "tasks" / "medal"))
    hl = []
    for r in records:
        d = {}
        for lab in r["labels"]:
            d.setdefault(lab["dimension"], {})[lab["annotator"]] = lab["value"]
        hl.append(d)
    res = m.compute(
        dialogues=[conv(r) for r in records], judge=f"replay:{replay}", human_labels=hl, n_bootstrap=20
    )
    assert len(res["overall"]) == len(records) and res["parse_failures"] >= 1
    assert res["prompt"]["name"] == "medal-dialogue-evaluation"
    assert "repetitive/f1_pos" in res["issue_detection"] and "spearman" in res["correlation"]
    with pytest.raises(ValueError, match="judge"):
        m.compute(dialogues=["user: hi"])


def test_stability_command(tmp_path, medal_src):
    verdicts = [verdict_text({"repetitive": 1}, 3), verdict_text({}, 5)]
    rp = tmp_path / "s.jsonl"
    # the verdicts cycle over calls, so the same dialogue gets different verdicts in different runs
    rp.write_text(json.dumps({"match": ".", "responses": [{"text": v} for v in verdicts]}))
    res = CliRunner().invoke(
        app,
        [
            "stability",
            "--judge",
            f"replay:{rp}",
            "--task",
            "medal",
            "--runs",
            "3",
            "--source",
            str(medal_src),
            "--language",
            "en",
            "--output",
            str(tmp_path / "st"),
            "--bootstrap",
            "0",
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    rep = json.loads((tmp_path / "st" / "stability.json").read_text())
    st = rep["tasks"]["medal"]
    assert rep["runs"] == 3 and set(MEDAL_ISSUES) | {"overall"} <= set(st)
    runs = [pd.read_parquet(tmp_path / "st" / f"run-{r}" / "samples.parquet") for r in range(3)]
    scores = np.array([r.sort_values("id")["score"].to_numpy() for r in runs])
    assert st["overall"]["mean_item_std"] == pytest.approx(float(np.std(scores, axis=0).mean()))
    assert st["overall"]["n_runs"] == 3
    bad = CliRunner().invoke(
        app,
        ["stability", "--judge", f"replay:{rp},seed=1", "--task", "medal", "--source", str(medal_src), "-q"],
    )
    assert bad.exit_code == 2 and "seed" in bad.output
    mean = CliRunner().invoke(
        app,
        [
            "stability",
            "--judge",
            f"mean:replay:{rp}+replay:{rp}",
            "--task",
            "medal",
            "--source",
            str(medal_src),
            "-q",
        ],
    )
    assert mean.exit_code == 2 and "each member" in mean.output
