"""The annotation form is generated from the dataset's dimension table and the task's label schema."""

from __future__ import annotations

import pytest

from harness.annotate.form import Form, FormError, form_for
from harness.tasks import get_task
from tests.fixtures.annotation import build_demo, build_medal


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return build_demo(tmp_path_factory.mktemp("ds") / "demo")


@pytest.fixture(scope="module")
def medal(tmp_path_factory):
    return build_medal(tmp_path_factory.mktemp("ds") / "medal")


def test_medal_form_has_the_eight_issues_as_toggles_and_overall_as_buttons(medal):
    form = form_for(medal, get_task("medal"), None, dataset="medal@1.0.0")
    assert form.level == "dialogue" and form.configs == ("benchmark",) and form.headline == "overall"
    assert form.dimensions == (
        "uninterpretable",
        "unsafe",
        "lacks_empathy",
        "lacks_commonsense",
        "repetitive",
        "incoherent",
        "irrelevant",
        "nonfactual",
        "overall",
    )
    issues = form.fields[:8]
    assert all(f.kind == "binary" and len(f.keys) == 1 for f in issues)
    letters = [f.keys[0] for f in issues]
    assert len(set(letters)) == 8 and all(k.isalpha() for k in letters)  # one distinct toggle letter each
    overall = form.field("overall")
    assert overall.kind == "likert" and overall.keys == ("1", "2", "3", "4", "5")
    assert [v for v, _ in overall.points] == [1, 2, 3, 4, 5]
    # definitions come from the dataset's dimension table (MEDAL Table 1) ...
    assert "unclear or confusing" in form.field("uninterpretable").definition
    # ... and the guideline is the Table 11 instruction beside them, without format escapes
    assert "Mark if:" in form.guideline and "Lacks Empathy" in form.guideline
    assert "{{" not in form.guideline and "| `nonfactual` |" in form.guideline
    assert "other" not in form.dimensions  # judged but never annotated by humans


def test_field_problems_follow_the_scale(medal):
    form = form_for(medal, get_task("medal"), None)
    assert form.field("overall").problem(6) is not None
    assert form.field("overall").problem(2.5) is not None
    assert form.field("overall").problem(3) is None
    assert form.field("repetitive").problem(1) is None and form.field("repetitive").problem(2) is not None
    assert form.field("overall").problem(True) is not None  # a JSON boolean is not a label
    with pytest.raises(KeyError, match="unknown dimension 'fluency'.*overall"):
        form.field("fluency")


def test_form_without_task_uses_the_labelled_dimensions_of_one_config(demo):
    form = form_for(demo, None, "demo-dial")
    assert form.level == "dialogue" and form.dimensions == ("coherence",) and form.headline == "coherence"
    assert "coherent" in form.field("coherence").definition and "## Labels" in form.guideline


def test_form_of_a_turn_task_quotes_its_question(demo):
    form = form_for(demo, get_task("demo-turn"), None)
    assert form.level == "turn" and form.dimensions == ("relevance",)
    assert "## The question" in form.guideline and "[response]" in form.guideline


def test_form_json_round_trip_and_wire_format(medal):
    form = form_for(medal, get_task("medal"), None)
    assert Form.from_record(form.to_record()) == form
    wire = form.to_json()
    assert set(wire) == {"task", "dataset", "level", "guideline", "fields"}
    overall = wire["fields"][-1]
    assert overall["points"][0] == {"value": 1.0, "label": "Very bad", "key": "1"}


def test_unusable_choices_are_errors_naming_the_way_forward(demo, medal):
    with pytest.raises(FormError, match="two levels"):
        form_for(demo, None, None)
    with pytest.raises(FormError, match="no config 'nope'"):
        form_for(demo, None, "nope")
    with pytest.raises(FormError, match="reads none of this dataset's configs"):
        form_for(demo, get_task("medal"), None)
    with pytest.raises(FormError, match="does not define"):
        form_for(demo, get_task("medal"), "demo-dial")
