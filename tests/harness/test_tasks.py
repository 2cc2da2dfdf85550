import dataclasses
from pathlib import Path

import pytest

from harness import tasks as T
from harness.registry import DuplicateError
from harness.scorers import GPTScore, IssuesJSON, ParseScore, PYes, make_scorer
from harness.tasks import PromptTemplate, get_task, resolve_tasks, validate

REPO = Path(__file__).resolve().parents[2]


def test_registered_tasks_are_valid():
    assert validate(repo_root=REPO) == []
    names = set(T.all_tasks())
    assert {"xdial-eval-turn", "xdial-eval-dialogue", "demo-turn", "demo-dialogue"} <= names


def test_groups_expand_in_order():
    assert [s.name for s in resolve_tasks(["xdial-eval"])] == ["xdial-eval-turn", "xdial-eval-dialogue"]
    assert [s.name for s in resolve_tasks(["demo-dialogue,demo"])] == ["demo-dialogue", "demo-turn"]
    with pytest.raises(KeyError, match="unknown task"):
        resolve_tasks(["nope"])


def test_turn_prompt_is_table3_instruction():
    spec = get_task("xdial-eval-turn")
    item = {
        "language": "en",
        "context": [
            {"role": "user", "text": "hello , tell me something about yourself !"},
            {"role": "assistant", "text": "i am 56 years old and i am a housekeeper ."},
            {"role": "user", "text": "do you have any hobbies or interests ?"},
        ],
        "response": "i like to read and write poetry .",
    }
    req = spec.build_request(item)
    assert req.choices == ("Yes", "No")
    assert req.config.temperature == 0.0
    assert req.messages[-1].content == (
        "### Instruction:\nGiven the following dialogue context and response, predict whether the response is "
        "relevant to the context.\n\n### Input:\nDialogue Context:\nhello , tell me something about yourself !\n"
        "i am 56 years old and i am a housekeeper .\ndo you have any hobbies or interests ?\n\n"
        "Dialogue Response:\ni like to read and write poetry ."
    )


def test_dialogue_prompt_uses_speaker_tags():
    spec = get_task("xdial-eval-dialogue")
    item = {
        "language": "zh",
        "turns": [{"role": "user", "text": "你好"}, {"role": "assistant", "text": "你好！"}],
    }
    content = spec.build_request(item).messages[-1].content
    assert content.endswith("### Input:\n[H] 你好\n[C] 你好！")
    assert "predict whether the dialogue is coherent?" in content


def test_validate_reports_each_problem():
    base = get_task("demo-turn")
    bad_tpl = PromptTemplate(name="bad", user="Rate {dialogue} and {nonsense}", source="test")
    broken = dataclasses.replace(
        base,
        name="broken",
        languages=("en", "xx"),
        templates={"en": bad_tpl, "fr": base.templates["fr"]},
        builder="no-such-builder",
        evaluate_dir="tasks/missing_module",
        metrics=("spearman", "alt_test"),
        meta_metrics=("spearman", "no_such_metric"),
    )
    problems = validate([broken], repo_root=REPO)
    text = "\n".join(problems)
    assert "unknown language code 'xx'" in text
    assert "missing prompt template for language 'xx'" in text
    assert "template for 'fr', which is not among" in text
    assert "unknown placeholder(s) ['dialogue', 'nonsense']" in text
    assert "dataset builder 'no-such-builder'" in text
    assert "evaluate module" in text
    assert "meta-metric(s) ['no_such_metric'] are not registered" in text
    assert "metrics ['alt_test'] are not correlation methods" in text


def test_a_duplicate_task_id_is_an_error_naming_both():
    spec = get_task("demo-turn")
    with T.TASKS.isolated():
        assert T.register_task(dataclasses.replace(spec)) is spec  # an equal spec again: a no-op
        with pytest.raises(
            DuplicateError, match="task 'demo-turn' is already registered .*from plug-in 'builtin'"
        ):
            T.register_task(dataclasses.replace(spec, description="another demo"))
        with pytest.raises(TypeError, match="expects a TaskSpec"):
            T.register_task("demo-turn")  # type: ignore[arg-type]


def test_template_hash_changes_with_content():
    a = PromptTemplate(name="a", user="x {context}", source="s")
    b = dataclasses.replace(a, user="y {context}")
    assert a.hash != b.hash and len(a.hash) == 16
    with pytest.raises(KeyError, match="needs field"):
        a.render({"response": "r"})


def test_validate_reports_placeholders_left_unfilled():
    base = get_task("demo-turn")
    pasted = PromptTemplate(
        name="pasted", source="s", user="Dialogue context: <dialogue>\nResponse: {response}\nScore:"
    )
    escaped = PromptTemplate(name="escaped", source="s", user="Context {{context}} and {response}")
    system_left = PromptTemplate(
        name="sys", source="s", system="Judge this: [Dialogue Context]", user="{context} {response}"
    )
    broken = dataclasses.replace(
        base,
        name="unfilled",
        languages=("en", "de", "fr"),
        templates={"en": pasted, "de": escaped, "fr": system_left},
    )
    text = "\n".join(validate([broken], repo_root=REPO))
    assert "template 'pasted' (en) leaves placeholder '<dialogue>' unfilled in its user message" in text
    assert "template 'escaped' (de) leaves placeholder '{context}' unfilled" in text
    assert (
        "template 'sys' (fr) leaves placeholder '[Dialogue Context]' unfilled in its system message" in text
    )


def test_scorers_check_their_parameters_when_made():
    with pytest.raises(
        ValueError, match="scoring 'parse_score': score_range must be \\(lo, hi\\) with lo < hi"
    ):
        ParseScore(range=(5, 1))
    with pytest.raises(ValueError, match="scoring 'gptscore': needs a continuation containing its target"):
        GPTScore(continuation="Answer: No.", target="Yes")
    with pytest.raises(ValueError, match="scoring 'issues_json': needs issue_labels"):
        IssuesJSON()
    with pytest.raises(ValueError, match="scoring 'p_yes': labels must be two different"):
        PYes(labels=("Yes", "Yes"))
    assert make_scorer("parse_score", range=[1, 3], integer=True) == ParseScore(range=(1, 3), integer=True)
    with pytest.raises(ValueError, match="unknown parameter\\(s\\) \\['score_range'\\]"):
        make_scorer("parse_score", score_range=[1, 3])


def test_validate_reports_an_unregistered_scorer():
    @dataclasses.dataclass(frozen=True)
    class Unregistered(PYes):
        name = "not_registered"

    bad = dataclasses.replace(get_task("demo-turn"), name="s1", scorer=Unregistered())
    text = "\n".join(validate([bad], repo_root=REPO))
    assert "'s1': scoring method 'not_registered' (" in text and "is not registered" in text


def test_dialogue_level_conversation_field_uses_role_names():
    spec = get_task("demo-dialogue")
    fields = spec.fields({"turns": [{"role": "user", "text": "Hi"}, {"role": "assistant", "text": "Hello!"}]})
    assert fields["conversation"] == "user: Hi\nassistant: Hello!"
    assert fields["dialogue"].startswith("[H] Hi")
