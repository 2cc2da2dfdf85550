"""Plug-in discovery: the core's registries are filled from entry points, a broken plug-in names
itself, and judge kinds can be added without touching the core."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from harness import plugins
from harness.data.builders import builder_class, list_builders
from harness.judges import load_judge
from harness.judges.base import Judge, Verdict
from harness.judges.loader import judge_class
from harness.registry import DuplicateError
from harness.spec import JUDGE_KINDS, JudgeKind, SpecError, judge_kinds, parse_spec, register_judge_kind
from harness.tasks import all_tasks


def test_this_project_declares_its_plugins():
    assert [ep.value for ep in plugins.group(plugins.BUILDERS_GROUP)] == ["dataset_builders:register_all"]
    assert [ep.value for ep in plugins.group(plugins.TASKS_GROUP)] == ["tasks:register_all"]
    assert {ep.name: ep.value for ep in plugins.group(plugins.JUDGES_GROUP)} == {
        "evaluator": "finetune.evaluator_judge:KIND"
    }


def test_registries_are_filled_from_the_plugins():
    assert {"xdial-eval", "upheld", "medal", "demo", "common", "import"} <= set(list_builders())
    assert builder_class("demo").__module__ == "dataset_builders.demo"
    assert {"demo-turn", "xdial-eval-turn", "medal", "upheld-content"} <= set(all_tasks())
    kinds = judge_kinds()
    assert {"embed", "hf", "vllm", "openai", "replay", "metric", "ensemble", "mean", "evaluator"} <= set(
        kinds
    )
    assert kinds["evaluator"].judge == "finetune.evaluator_judge:EvaluatorJudge"
    assert judge_class("evaluator").__module__ == "finetune.evaluator_judge"
    assert judge_class("openai").__name__ == "LLMJudge"


def test_a_broken_plugin_names_itself():
    ep = EntryPoint(name="broken", value="no_such_module_xyz:register", group=plugins.TASKS_GROUP)
    with pytest.raises(plugins.PluginError, match=r"plug-in 'broken' of group 'dialeval_harness.tasks'"):
        plugins.load(ep)


class _EchoJudge(Judge):
    """Scores every item 1.0: the smallest possible judge kind."""

    def score(self, task, items):
        return [Verdict(1.0, "ok", "1", "h") for _ in items]

    def identity(self):
        return {"backend": "echo"}


def test_a_new_judge_kind_plugs_in():
    with JUDGE_KINDS.isolated():
        kind = register_judge_kind(JudgeKind("echo", f"{__name__}:_EchoJudge", "echo:x", "test kind"))
        assert register_judge_kind(kind) is kind  # idempotent
        js = parse_spec("echo:anything,threshold=2")
        assert js.kind == "echo" and js.options == {"threshold": 2}
        judge = load_judge("echo:x")
        assert isinstance(judge, _EchoJudge) and judge.score(None, [{}, {}])[1].score == 1.0
        with pytest.raises(DuplicateError, match="judge kind 'echo' is already registered"):
            register_judge_kind(JudgeKind("echo", "elsewhere:Other", "echo:y"))
        with pytest.raises(ValueError, match="must match"):
            register_judge_kind(JudgeKind("Bad Kind", "m:C", "x"))
        with pytest.raises(TypeError):
            register_judge_kind("echo")  # type: ignore[arg-type]
    assert "echo" not in judge_kinds()  # isolated() undid the registration


def test_unknown_kinds_and_non_judge_targets_are_clear_errors():
    with pytest.raises(SpecError, match="unknown judge kind 'nope'.*evaluator"):
        parse_spec("nope:x")
    with JUDGE_KINDS.isolated():
        register_judge_kind(JudgeKind("notajudge", "harness.spec:JudgeKind", "notajudge:x"))
        with pytest.raises(TypeError, match="not a Judge subclass"):
            judge_class("notajudge")
