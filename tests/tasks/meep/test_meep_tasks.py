"""MEEP tasks (Ferron et al., 2023): the App. A prompt family as data, the task registry, and runs end
to end through ``harness.run.runner.run`` (replay judge, tiny random hf models) and the evaluate module."""

import json
import math
from pathlib import Path

import evaluate
import pytest
from scipy import stats

from harness.cache import RequestCache
from harness.judges import load_judge
from harness.run.runner import RunConfig, run
from harness.scorers import GPTScore, ParseScore
from harness.tasks import LEVEL_FIELDS, get_task, groups, resolve_tasks, unfilled_placeholders, validate
from tasks.meep import CONFIGS, TASKS
from tasks.meep import templates as T
from tests.fixtures.meep_replay import (
    DIAL_REPLIES,
    ES_ROLE_REPLY,
    FED_REPLIES,
    ROLE_REPLIES,
    SCALE_1_3_REPLIES,
    write_meep_dataset,
    write_replay,
)

REPO = Path(__file__).resolve().parents[3]
ROLE_EN = "You are an expert evaluator of dialogue."

TURN_TASKS = [
    "meep-naive",
    "meep-naive-r",
    "meep-hd",
    "meep-hd-r",
    "meep-meep",
    "meep-meep-r",
    "meep-meep-sa",
    "meep-meep-sa-r",
    "meep-meep-sa-native",
    "meep-meep-sa-r-native",
]
ITEM = {
    "id": "x",
    "language": "en",
    "context": [
        {"role": "user", "text": "Hi!"},
        {"role": "assistant", "text": "Hiii! How are you?"},
        {"role": "user", "text": "I am good"},
    ],
    "response": "That's understandable. Good luck, I hope it goes smoothly!",
}
DIALOGUE = {
    "id": "d",
    "language": "en",
    "turns": [
        {"role": "user", "text": "I want to visit West Lake."},
        {"role": "assistant", "text": "Great idea!"},
    ],
}


@pytest.fixture
def dataset(tmp_path):
    return write_meep_dataset(tmp_path / "meep-ds")


@pytest.fixture
def judge(tmp_path):
    return write_replay(tmp_path / "judge.jsonl")


# -- prompts as data -----------------------------------------------------------------------------
KEY_PHRASES = {
    "meep-naive": [
        "where a score of zero means ‘disengaging’ and a score of 100 means ‘very engaging’",
        "Assume the response immediately follows the dialogue context.",
    ],
    "meep-hd": [
        "This might be an inquisitive question or an interesting response that can be followed-up on.",
        "A score of 2 means Somewhat: the response is not particularly engaging but still leaves room for follow-up.",
        "· I have a feeling that if you can dodge a wrench you can dodge a ball.",
    ],
    "meep-meep": [
        "likelihood of creating a sense of belonging for the other participant",
        "variety of response according to the context, likelihood of encouraging the other participant to respond",
    ],
    "meep-meep+sa": [
        "such as responding to ‘Hi how are you?’ with ‘I feel magnificent, because I just successfully defended my PhD! How are you?’",
        "(such as ‘I love legos! I like using them to make funny things. Do you like legos?’ instead of ‘I like legos.’)",
        "likelihood of creating a sense of belonging for the other participant",
    ],
    "meep-meep+sa-es": [
        "donde una puntuación de cero significa “desinteresante”",
        "probabilidad de crear un sentido de pertenencia para el otro participante.",
    ],
    "meep-meep+sa-zh": ["其中0分表示“不吸引人”，100分表示“非常吸引人”", "为其他参与者创造归属感的可能性"],
    "meep-g-eval": [
        "Engagingness (1-3) Is the response dull/interesting?",
        "1. Read the conversation, the corresponding fact and the response carefully.",
        "Evaluation Form (scores ONLY):\n- Engagingness:",
    ],
    "meep-gptscore": [
        "Answer the question based on the conversation between a human and AI.",
        "Question: Are the responses of AI engaging? (a) Yes. (b) No.",
    ],
    "meep-meep+sa-dial": [
        "In this task, you will be shown part of a dialogue.",
        "likelihood of encouraging quality responses from the other participant",
        "Consider the overall engagingness of the conversation.",
    ],
    "meep-g-eval-dial": [
        "Engagingness (1-3) Is the conversation dull/interesting?",
        "1. Read the conversation carefully.",
        "- Engagingness:",
    ],
}


@pytest.mark.parametrize("tpl", T.ALL_TEMPLATES, ids=lambda t: t.name)
def test_every_template_renders_with_no_placeholder_left(tpl):
    level = "dialogue" if tpl.name.endswith("-dial") else "turn"
    assert unfilled_placeholders(tpl, level) == []
    assert tpl.placeholders() <= LEVEL_FIELDS[level]
    fields = {f: f"@@{f}@@" for f in LEVEL_FIELDS[level]}
    msgs = tpl.render(fields)
    text = "\n".join(m.content for m in msgs)
    for leftover in ("<dialogue>", "<response>", "<conversation>", "<score>", "{", "}"):
        assert leftover not in text, leftover
    if level == "turn":
        assert "@@context@@" in text and "@@response@@" in text
    else:
        assert "@@conversation@@" in text
    assert tpl.source.startswith("MEEP (Ferron et al., 2023) App. A Table ")
    assert tpl.version == "1"
    for phrase in KEY_PHRASES.get(tpl.name.replace("+r", ""), []):
        assert phrase in tpl.user, phrase


def test_prompt_layout_and_placeholders():
    user = get_task("meep-naive").build_request(ITEM).messages[-1].content
    # Table 7's "Response: <dialogue>" typo is the response; the context is one turn per line
    assert user.endswith(
        "Dialogue context: Hi!\nHiii! How are you?\nI am good\n\n"
        "Response: That's understandable. Good luck, I hope it goes smoothly!\n\nScore:"
    )
    es = get_task("meep-meep-sa-native").build_request(dict(ITEM, language="es")).messages[-1].content
    assert es.startswith("Evalúa la siguiente respuesta") and es.endswith(
        "Respuesta: " + ITEM["response"] + "\n\nPuntuación:"
    )
    zh = get_task("meep-meep-sa-native").build_request(dict(ITEM, language="zh")).messages[-1].content
    assert zh.startswith("根据相应的对话背景") and zh.endswith("\n\n评分:")
    # the English prompt for every language in the plain variants
    assert (
        get_task("meep-meep-sa")
        .build_request(dict(ITEM, language="zh"))
        .messages[-1]
        .content.startswith("Score the following response")
    )
    dial = get_task("meep-meep-sa-dial").build_request(DIALOGUE).messages[-1].content
    assert dial.endswith("Dialogue: user: I want to visit West Lake.\nassistant: Great idea!\n\nScore:")
    gev = get_task("meep-geval-dial").build_request(DIALOGUE).messages[-1].content
    assert "Conversation: user: I want to visit West Lake." in gev and gev.endswith("- Engagingness:")
    # all 17 prompts are distinct
    assert len({t.hash for t in T.ALL_TEMPLATES}) == len(T.ALL_TEMPLATES)


def test_role_assignment_is_the_system_message():
    for name in ("meep-naive-r", "meep-hd-r", "meep-meep-r", "meep-meep-sa-r", "meep-meep-sa-r-dial"):
        item = DIALOGUE if name.endswith("dial") else ITEM
        msgs = get_task(name).build_request(item).messages
        assert [m.role for m in msgs] == ["system", "user"] and msgs[0].content == ROLE_EN
        plain = get_task(name[: -len("-r")] if not name.endswith("dial") else "meep-meep-sa-dial")
        assert [m.role for m in plain.build_request(item).messages] == ["user"]
        assert msgs[1].content == plain.build_request(item).messages[0].content  # same prompt text
    native = get_task("meep-meep-sa-r-native")
    for lang, role in (
        ("en", ROLE_EN),
        ("es", "Eres experto en evaluación de diálogos."),
        ("zh", "你是一名对话评估的专家。"),
    ):
        assert native.build_request(dict(ITEM, language=lang)).messages[0].content == role


def test_gptscore_request_scores_the_answer_continuation():
    task = get_task("meep-gptscore")
    req = task.build_request(ITEM)
    assert req.continuation == "Answer: Yes." and req.choices is None and req.config.max_tokens == 1
    assert req.messages[-1].content.endswith(
        "Dialogue context: Hi!\nHiii! How are you?\nI am good\nResponse: " + ITEM["response"] + "\n"
    )
    assert "Answer: Yes." not in req.messages[-1].content
    assert task.scorer == GPTScore(continuation="Answer: Yes.", target="Yes")


# -- registry ------------------------------------------------------------------------------------
def test_tasks_registered_with_groups_scoring_and_validate():
    g = groups()
    assert g["meep"] == TURN_TASKS
    assert g["meep-dial"] == ["meep-meep-sa-dial", "meep-meep-sa-r-dial"]
    assert sorted(g["meep-baselines"]) == ["meep-geval", "meep-geval-dial", "meep-gptscore"]
    specs = resolve_tasks(["meep", "meep-dial", "meep-baselines"])
    assert len(specs) == 15 and {t.name for t in TASKS.values()} == {s.name for s in specs}
    assert validate(specs, repo_root=REPO) == []
    for s in specs:
        assert (
            s.builder == "common" and s.dimension == "engagingness" and s.metrics == ("spearman", "pearson")
        )
        assert s.evaluate_dir == "tasks/meep" and "Ferron" in s.citation and "EMNLP 2023" in s.citation
        if s.level == "turn":
            assert s.configs == ("fed-turn", "see-turn") and s.languages == ("en", "es", "zh")
        else:
            assert s.configs == ("kdconv-dial", "lccc-dial") and s.languages == ("en", "zh")
        if s.scoring == "parse_score":
            scale_1_3 = s.name in ("meep-hd", "meep-hd-r", "meep-geval", "meep-geval-dial")
            assert s.scorer == ParseScore(range=(1, 3) if scale_1_3 else (0, 100), integer=scale_1_3)
            assert (
                s.generation.max_tokens == 256
                and s.generation.temperature == 0.0
                and s.generation.top_p == 1.0
            )
        else:
            assert s.name == "meep-gptscore" and s.scoring == "gptscore" and s.generation.max_tokens == 1
    assert set(CONFIGS) == {
        "naive",
        "naive_r",
        "hd",
        "hd_r",
        "meep",
        "meep_r",
        "meep_sa",
        "meep_sa_r",
        "meep_sa_native",
        "meep_sa_r_native",
        "geval",
        "gptscore",
        "meep_sa_dial",
        "meep_sa_r_dial",
        "geval_dial",
    }


def test_max_tokens_is_overridable_by_the_judge_spec(judge):
    task = get_task("meep-meep-sa")
    assert load_judge(judge, RequestCache(enabled=False)).generation_config(task).max_tokens == 256
    j = load_judge(judge + ",max_tokens=1024", RequestCache(enabled=False))
    assert j.generation_config(task).max_tokens == 1024


# -- end to end ----------------------------------------------------------------------------------
def _run(tmp_path, judge, dataset, tasks, **kw):
    cfg = dict(
        judge=judge,
        tasks=tasks,
        dataset=str(dataset),
        output_dir=tmp_path / "run",
        n_bootstrap=50,
        show_progress=False,
        use_cache=False,
    )
    return run(RunConfig(**{**cfg, **kw}))


def test_written_scores_end_to_end_with_replay(tmp_path, judge, dataset):
    out = _run(tmp_path, judge, dataset, ["meep-meep-sa", "meep-naive-r", "meep-meep-sa-r-native"])
    res, s = out.results, out.samples
    sa = s[(s.task == "meep-meep-sa") & (s.dataset == "fed-turn")].set_index("id")
    for lang, replies in FED_REPLIES.items():
        for k, (text, value) in enumerate(replies):
            row = sa.loc[f"fed-turn-{lang}-{k}"]
            assert row.raw_output == text
            if value is None:  # scored None and counted, never 0 or clipped
                assert row.parse_status == "parse_error" and math.isnan(row.score), text
            else:
                assert row.parse_status == "ok" and row.score == value, text
    n_fail = sum(v is None for replies in FED_REPLIES.values() for _, v in replies)
    assert res["parse_failures"]["meep-meep-sa"] == n_fail == 4
    assert "outside 0-100" in sa.loc["fed-turn-en-2"].parse_detail
    en = res["results"]["meep-meep-sa"]["en"]
    assert en["spearman"]["parse_failures"] == 2 and en["pearson"]["n"] == 4 + 3
    fed = en["spearman"]["per_dataset"]["fed-turn"]
    ok = sa[(sa.language == "en") & (sa.parse_status == "ok")]
    ref = stats.spearmanr(ok.score, ok.human_rating)
    assert fed["value"] == pytest.approx(ref.statistic) and fed["p_value"] == pytest.approx(ref.pvalue)
    assert fed["n"] == 4 and fed["parse_failures"] == 2 and fed["ci"] is not None
    assert res["results"]["meep-meep-sa"]["all"]["pearson"]["value"] is not None
    assert res["tasks"]["meep-meep-sa"]["score_range"] == [0.0, 100.0]
    assert res["judge"]["decoding"]["meep-meep-sa"]["max_tokens"] == 256

    # role variants: the system message comes first in the rendered request (replay rule "^system: ...")
    r = s[s.task == "meep-naive-r"]
    assert set(r.raw_output) <= set(ROLE_REPLIES) and len(set(r.raw_output)) > 1
    assert not set(s[s.task == "meep-meep-sa"].raw_output) & {"Score: 10", "Score: 70"}
    native = s[s.task == "meep-meep-sa-r-native"]
    assert set(native[native.language == "es"].raw_output) == {ES_ROLE_REPLY}
    assert set(native[native.language == "zh"].score) == {65.0}  # "评分：六十五"
    assert set(native[native.language == "en"].raw_output) <= set(ROLE_REPLIES)
    assert res["parse_failures"]["meep-naive-r"] == 0


def test_scale_1_3_and_dialogue_tasks_end_to_end(tmp_path, judge, dataset):
    out = _run(tmp_path, judge, dataset, ["meep-hd", "meep-geval-dial", "meep-meep-sa-dial"])
    s = out.samples
    hd = s[s.task == "meep-hd"]
    assert set(hd.raw_output) <= set(SCALE_1_3_REPLIES)
    assert set(hd.score.dropna()) <= {2.0, 3.0}
    bad = hd[hd.raw_output == "Engagingness: 5"]
    assert len(bad) and bad.score.isna().all() and (bad.parse_status == "parse_error").all()
    assert out.results["parse_failures"]["meep-hd"] == len(bad)
    dial = s[s.task == "meep-meep-sa-dial"]
    assert set(dial.dataset) == {"kdconv-dial", "lccc-dial"} and set(dial.language) == {"en", "zh"}
    assert set(dial.raw_output) <= set(DIAL_REPLIES)
    assert (
        out.results["parse_failures"]["meep-meep-sa-dial"]
        == int((dial.raw_output == "Score: none").sum())
        > 0
    )
    assert set(s[s.task == "meep-geval-dial"].raw_output) <= set(SCALE_1_3_REPLIES)
    assert out.results["results"]["meep-meep-sa-dial"]["zh"]["spearman"]["n"] > 0


def test_gptscore_end_to_end_with_replay(tmp_path, judge, dataset):
    out = _run(tmp_path, judge, dataset, ["meep-gptscore"])
    s = out.samples.set_index("id")
    first = s.loc["fed-turn-en-0"]
    assert first.parse_status == "ok" and first.score == pytest.approx(-0.2)  # " Yes" only, not the sum -0.5
    assert json.loads(first.extra)["continuation_logprob"] == pytest.approx(-0.5)
    assert (s.parse_status == "ok").all() and (s.score <= 0).all() and s.score.nunique() > 5
    assert out.results["parse_failures"]["meep-gptscore"] == 0
    assert out.results["tasks"]["meep-gptscore"]["continuation"] == "Answer: Yes."
    assert out.results["results"]["meep-gptscore"]["en"]["spearman"]["value"] is not None


def test_tiny_hf_model_written_score_task_end_to_end(tmp_path, tiny_qwen2, dataset):
    out = _run(tmp_path, f"hf:{tiny_qwen2},max_tokens=8", dataset, ["meep-naive"], limit=2, n_bootstrap=0)
    s = out.samples
    assert len(s) == 2 * 3 * 2  # 2 configs x 3 languages x limit 2
    # random weights write gibberish: failures are None and counted, never scored 0
    assert ((s.parse_status == "ok") == s.score.notna()).all()
    assert out.results["parse_failures"]["meep-naive"] == int((s.parse_status != "ok").sum())
    assert s[s.parse_status == "ok"].score.between(0, 100).all()
    assert out.results["judge"]["decoding"]["meep-naive"]["max_tokens"] == 8


def test_tiny_hf_model_gptscore_end_to_end(tmp_path, tiny_qwen2, dataset):
    out = _run(
        tmp_path,
        f"hf:{tiny_qwen2}",
        dataset,
        ["meep-gptscore"],
        limit=2,
        languages=["en", "es"],
        n_bootstrap=0,
    )
    s = out.samples
    assert len(s) == 2 * 2 * 2 and (s.parse_status == "ok").all()
    for _, row in s.iterrows():
        total = json.loads(row.extra)["continuation_logprob"]
        assert total <= row.score <= 0  # "Yes" is part of "Answer: Yes.": its log-prob is >= the total
        assert "Yes" in row.parse_detail
    assert s.score.nunique() > 1  # different prompts, different log-probs


# -- evaluate module -----------------------------------------------------------------------------
def test_evaluate_module_turn_level_with_correlations(tmp_path, judge):
    m = evaluate.load(str(REPO / "tasks" / "meep"), "meep_sa")
    ctx = "Hi!\nHiii! How are you?\nI am good"
    langs = ["en"] * 6 + ["es"] * 6
    responses = [f"Nice! (id fed-{lang}-{k % 6})" for k, lang in enumerate(langs)]
    human = [0.9, 0.7, 0.5, 0.3, 0.1, 1.0] * 2
    out = m.compute(
        contexts=[ctx] * 12, responses=responses, judge=judge, languages=langs, human=human, n_bootstrap=50
    )
    expected = [v for lang in ("en", "es") for _, v in FED_REPLIES[lang]]
    assert out["scores"] == expected
    assert out["parse_failures"] == 3 and [f["index"] for f in out["failures"]] == [2, 3, 9]
    assert out["raw"][1] == "Score: seventy-five"
    assert set(out["prompt"]) == {"en", "es"} and out["prompt"]["en"]["name"] == "meep-meep+sa"
    pairs = [(s, h) for s, h in zip(expected, human, strict=True) if s is not None]
    ref = stats.spearmanr(*zip(*pairs, strict=True))
    sp = out["correlations"]["spearman"]
    assert sp["value"] == pytest.approx(ref.statistic) and sp["p_value"] == pytest.approx(ref.pvalue)
    assert sp["n"] == 9 and sp["n_missing"] == 3 and sp["ci"] is not None
    pe = out["correlations"]["pearson"]
    assert pe["value"] == pytest.approx(stats.pearsonr(*zip(*pairs, strict=True)).statistic)
    assert set(out["per_language"]) == {"en", "es"} and out["per_language"]["en"]["pearson"]["n"] == 4


def test_evaluate_module_dialogue_level_and_errors(judge):
    m = evaluate.load(str(REPO / "tasks" / "meep"), "geval_dial")
    dialogues = [f"user: I want to visit West Lake ({k}).\nassistant: Great idea!" for k in range(4)]
    out = m.compute(dialogues=dialogues, judge=judge, languages=["en", "zh", "en", "zh"])
    assert out["raw"] == SCALE_1_3_REPLIES
    assert out["scores"] == [3.0, 2.0, 2.0, None] and out["parse_failures"] == 1
    assert "correlations" not in out and out["prompt"]["zh"]["name"] == "meep-g-eval-dial"
    with pytest.raises(ValueError, match="judge"):
        m.compute(dialogues=dialogues)
    with pytest.raises(ValueError, match="no prompt for language"):
        m.compute(dialogues=dialogues, judge=judge, languages=["es"] * 4)
    with pytest.raises(KeyError, match="unknown config"):
        evaluate.load(str(REPO / "tasks" / "meep"), "nope")
