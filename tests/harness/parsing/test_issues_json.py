import json

import jsonschema  # a dev dependency: the schema check must run, never skip
import pytest

from dataset_builders.medal_labels import MEDAL_ISSUES, MEDAL_OVERALL_KEY
from harness.parsing.issues_json import extract_json_object, issues_schema, parse_issues

LABELS = (*MEDAL_ISSUES, "other")


def verdict(overall=4, **labels):
    obj = {name: {"label": labels.get(name, 0), "comment": ""} for name in LABELS}
    obj[MEDAL_OVERALL_KEY] = {"label": overall, "comment": "Mostly fine."}
    return obj


def parse(text):
    return parse_issues(text, LABELS, MEDAL_OVERALL_KEY, (1, 5))


def test_valid_json_parses_every_label_and_the_overall():
    v = parse(json.dumps(verdict(overall=3, repetitive=1, unsafe=0)))
    assert v.ok and v.status == "ok" and v.overall == 3.0
    assert v.labels["repetitive"] == 1 and v.labels["unsafe"] == 0 and set(v.labels) == set(LABELS)
    assert v.errors == {} and v.comments == {MEDAL_OVERALL_KEY: "Mostly fine."}


def test_json_in_code_fence_after_reasoning_and_prose():
    text = (
        "<think>the assistant repeats itself {maybe}</think>Here is my evaluation:\n```json\n"
        + json.dumps(verdict(overall=2, repetitive=1))
        + "\n```\nHope this helps."
    )
    v = parse(text)
    assert v.ok and v.overall == 2.0 and v.labels["repetitive"] == 1


def test_last_json_object_wins_and_braces_inside_strings_are_fine():
    first = verdict(overall=5)
    second = verdict(overall=1, incoherent=1)
    second["incoherent"]["comment"] = "It says {nonsense} } here."
    v = parse(json.dumps(first) + "\nCorrection:\n" + json.dumps(second))
    assert v.overall == 1.0 and v.labels["incoherent"] == 1
    assert v.comments["incoherent"] == "It says {nonsense} } here."


@pytest.mark.parametrize(
    "text, why",
    [
        ("", "empty output"),
        ("The dialogue is fine, 5/5.", "no JSON object"),
        ('{"uninterpretable": {"label": 0,}, }', "invalid JSON"),
        ('{"uninterpretable": {"label": 0, "comment": ""}, "unsafe": ', "not closed"),
        ("<think>still thinking about the rubric", "never closed"),
    ],
)
def test_malformed_output_is_a_parse_failure_with_the_reason(text, why):
    v = parse(text)
    assert v.status == "parse_error" and v.overall is None
    assert all(x is None for x in v.labels.values()) and why in v.detail


def test_out_of_range_and_non_binary_labels_are_none_not_coerced():
    obj = verdict(overall=7)
    obj["unsafe"]["label"] = 2
    obj["repetitive"]["label"] = 0.5
    obj["irrelevant"]["label"] = "maybe"
    v = parse(json.dumps(obj))
    assert v.overall is None and v.status == "parse_error" and "outside 1-5" in v.errors[MEDAL_OVERALL_KEY]
    assert v.labels["unsafe"] is None and v.labels["repetitive"] is None and v.labels["irrelevant"] is None
    assert v.labels["incoherent"] == 0  # the valid fields still count
    assert {"unsafe", "repetitive", "irrelevant"} <= set(v.errors)


def test_missing_keys_are_counted_per_field():
    obj = verdict(overall=4)
    del obj["nonfactual"]
    obj["lacks_empathy"] = {"comment": "no label given"}
    v = parse(json.dumps(obj))
    assert v.ok  # overall parsed: the verdict counts, the two labels do not
    assert v.labels["nonfactual"] is None and v.errors["nonfactual"] == "missing key"
    assert v.labels["lacks_empathy"] is None and "no 'label'" in v.errors["lacks_empathy"]


def test_missing_overall_is_a_parse_failure():
    obj = verdict()
    del obj[MEDAL_OVERALL_KEY]
    v = parse(json.dumps(obj))
    assert v.status == "parse_error" and v.overall is None and v.labels["unsafe"] == 0


def test_words_booleans_strings_bare_values_and_key_spelling():
    obj = {name: {"label": "no", "comment": ""} for name in LABELS}
    obj.pop("lacks_empathy")
    obj["Lacks Empathy"] = {"label": True, "comment": "cold"}
    obj["repetitive"] = "1"
    obj["unsafe"] = {"label": "zero"}
    obj["Overall Quality Rating"] = {"label": "four", "comment": "good"}
    v = parse(json.dumps(obj))
    assert v.ok and v.overall == 4.0
    assert v.labels["lacks_empathy"] == 1 and v.labels["repetitive"] == 1 and v.labels["unsafe"] == 0
    assert v.labels["nonfactual"] == 0


def test_overall_alias_and_fractional_overall_inside_the_scale():
    obj = verdict()
    del obj[MEDAL_OVERALL_KEY]
    obj["overall"] = {"label": 3.5, "comment": ""}
    assert parse(json.dumps(obj)).overall == 3.5


def test_schema_requires_every_label_and_bounds_the_overall():
    schema = issues_schema(LABELS, MEDAL_OVERALL_KEY, (1, 5))
    assert schema["required"] == [*LABELS, MEDAL_OVERALL_KEY]
    assert schema["properties"]["unsafe"]["properties"]["label"]["enum"] == [0, 1]
    ov = schema["properties"][MEDAL_OVERALL_KEY]["properties"]["label"]
    assert (ov["minimum"], ov["maximum"]) == (1, 5)
    jsonschema.validate(verdict(overall=2, unsafe=1), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(verdict(overall=6), schema)


def test_extract_returns_reason():
    obj, why = extract_json_object('prefix {"a": 1} suffix')
    assert obj == {"a": 1} and why == ""


def test_control_character_in_a_comment_does_not_discard_the_labels():
    from harness.parsing.issues_json import COMMENT_MAX_CHARS, extract_json_object, issues_schema

    obj, why = extract_json_object('{"a": {"label": 1, "comment": "bad\x16\r text"}}')
    assert why == "" and obj["a"]["label"] == 1
    schema = issues_schema(["a"], "overall")
    assert schema["properties"]["a"]["properties"]["comment"]["maxLength"] == COMMENT_MAX_CHARS
