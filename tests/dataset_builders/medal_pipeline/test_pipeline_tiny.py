"""The MEDAL pipeline end to end on real (tiny, random) transformers models through the ``hf:`` backend.

Users and chatbots are the tiny random Llama / Qwen2 of :mod:`tests.fixtures.tiny_models`; the
in-loop user judge is a rigged tiny Llama that always answers "Yes" (:mod:`tests.fixtures.rigged_models`).
Random models cannot write Table 11 JSON, so the MEDAL labeller is a replay script in the main
test; the second test gives the labelling to a random model on purpose, to see its parse failures
counted (None labels), never coerced to 0.

Runtime: about 20 s for both tests on a laptop CPU (2 scenes × 2 languages, 4 turns, ≤ 12 tokens).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.fixtures.medal_pipeline import _verdict, fill_sheets, write_model_config
from tests.fixtures.rigged_models import build_yes_model

CONFIGS = ("seeds", "dialogues", "auto_labels", "curated", "benchmark")
CHATBOTS = {"tiny-llama", "tiny-qwen2"}


@pytest.fixture(scope="module")
def yes_model(tmp_path_factory, tiny_llama) -> Path:
    return build_yes_model(tmp_path_factory.mktemp("yes_model"), tiny_llama)


def test_yes_model_always_says_yes(yes_model):
    from harness.backends.base import create_backend
    from harness.spec import parse_spec
    from harness.types import ChatMessage, GenerationConfig, Request

    backend = create_backend(parse_spec(f"hf:{yes_model},max_tokens=4"))
    try:
        contents = [
            "user: hi, I just moved here and feel a bit lost.",
            "Yes",  # the prompt ending in the Yes token itself
            "Wie geht es dir? ¿Cómo estás? 你好，你今天怎么样？" * 20,
            "",
        ]
        for temperature, seed in ((0.0, None), (0.1, 0), (0.1, 7), (1.0, 3)):
            cfg = GenerationConfig(temperature=temperature, max_tokens=4, seed=seed)
            reqs = [
                Request((ChatMessage("system", "Answer Yes or No."), ChatMessage("user", c)), cfg)
                for c in contents
            ]
            reqs.append(Request((ChatMessage("user", "Is this natural?"),), cfg))  # no system message
            for resp in backend.generate(reqs):
                assert resp.text == "Yes", (temperature, resp.text)
                assert resp.finish_reason == "stop"  # "Yes", then EOS: parseable as Table 10's "Yes."
    finally:
        backend.close()

    from dataset_builders.medal_pipeline.prompts import parse_user_judge

    assert parse_user_judge("Yes") == (True, "")


# -- the pipeline ------------------------------------------------------------------------------------

VERDICTS = [
    _verdict({}, 5),
    _verdict({"repetitive": 1}, 3, {"repetitive": "The assistant repeats itself."}),
    _verdict({"uninterpretable": 1, "incoherent": 1}, 2, {"uninterpretable": "Nonsense words."}),
    _verdict({"lacks_empathy": 1}, 4),
    _verdict({}, 4),
]


def _write_config(
    root: Path, tiny_llama: Path, tiny_qwen2: Path, yes_model: Path, labeller: str | None
) -> Path:
    models = {
        "users": {"tiny-user": f"hf:{tiny_qwen2},max_tokens=12"},
        "chatbots": {  # same qwen2 weights as the user, other decoding: one shared backend
            "tiny-llama": f"hf:{tiny_llama},max_tokens=12",
            "tiny-qwen2": f"hf:{tiny_qwen2},max_tokens=12,top_p=0.9",
        },
        "user_judge": f"hf:{yes_model},max_tokens=4",
        **({"labeller": labeller} if labeller else {}),
    }
    return write_model_config(root, "medal-tiny", models, languages=["en", "de"], verdicts=VERDICTS)


def _build(cfg: Path, registry: Path, *extra: str) -> str:
    from harness.cli import app

    res = CliRunner().invoke(
        app, ["datasets", "build", "medal", "--config", str(cfg), "--registry", str(registry), "-q", *extra]
    )
    assert res.exit_code == 0, res.output + repr(res.exception)
    return res.output


def _card_configs(version_dir: Path) -> list[str]:
    head = re.match(r"^---\n(.*?)\n---\n", (version_dir / "README.md").read_text("utf-8"), re.S)
    assert head is not None, "the dataset card has no YAML header"
    return [c["config_name"] for c in yaml.safe_load(head.group(1))["configs"]]


def _load(version_dir: Path, config: str, cache: Path):
    import datasets

    return datasets.load_dataset(str(version_dir), config, split="test", cache_dir=str(cache))


def _cache_rows(work: Path) -> int:
    from harness.cache import RequestCache

    with RequestCache(work / "requests.sqlite") as cache:
        return cache.count()


def test_tiny_models_end_to_end_cli(tmp_path, tiny_llama, tiny_qwen2, yes_model):
    cfg = _write_config(tmp_path, tiny_llama, tiny_qwen2, yes_model, labeller=None)
    reg, work = tmp_path / "reg", tmp_path / "work"

    # -- first run: generate, label, curate, export sheets; version 1.0.0 without `benchmark`
    out = _build(cfg, reg)
    assert "annotation sheets" in out
    s1 = json.loads((work / "summary.json").read_text("utf-8"))
    g = s1["generation"]
    assert (
        g["dialogues"] == g["dialogues_with_turns"] == 2 * 2 * 2
    )  # 2 scenes × 2 languages × 1 user × 2 bots
    assert g["first_turn_pass_rate"] == pytest.approx(
        1.0
    )  # the rigged judge accepted every first turn at once
    assert g["user_judge_parse_failures"] == 0 and g["first_turn_rejected"] == 0
    assert set(g["usage"]) == {"tiny-user", "user_judge", *CHATBOTS}
    assert all(u["cached"] == 0 and u["completion_tokens"] > 0 for u in g["usage"].values())
    assert (
        g["usage"]["user_judge"]["completion_tokens"] == 2 * g["usage"]["user_judge"]["requests"]
    )  # Yes + EOS
    state = json.loads((work / "state.json").read_text("utf-8"))
    assert state["done"]
    verdicts = [a["judge_raw"] for slot in state["first_turns"].values() for a in slot["attempts"]]
    assert verdicts and set(verdicts) == {"Yes"}
    state_bytes = (work / "state.json").read_bytes()
    n_cached = _cache_rows(work)
    assert s1["rows"]["malformed"] == 0 and s1["curation"]["excluded"] == {}
    assert len(s1["curation"]["selected"]) == 4
    assert {p.name for p in (work / "annotation-sheets").iterdir() if p.is_dir()} == {"en", "de"}

    # -- annotators fill the sheets; the rerun imports them and publishes `benchmark` as 1.1.0
    fill_sheets(work / "annotation-sheets", tmp_path / "annotations", {"en": ["a1", "a2"], "de": ["a1"]})
    _build(cfg, reg, "--bump", "minor")
    s2 = json.loads((work / "summary.json").read_text("utf-8"))
    # nothing regenerated: the finished checkpoint was reused as it was, no model was called during
    # generation, and the labeller's requests came from the request cache (no new cache row)
    assert (work / "state.json").read_bytes() == state_bytes
    assert s2["generation"] == s1["generation"]
    assert not {"user", "user_judge", "chatbot"} & set(s2["timing_seconds"])
    assert _cache_rows(work) == n_cached
    assert s2["curation"]["selected"] == s1["curation"]["selected"]
    assert s2["annotation"]["annotators"] == {"en": ["a1", "a2"], "de": ["a1"]}

    version = reg / "medal-tiny" / "1.1.0"
    assert version.is_dir() and (reg / "medal-tiny" / "1.0.0").is_dir()
    assert _card_configs(version) == list(CONFIGS)  # no dialogue malformed: no `malformed` config
    assert "malformed" not in json.loads((version / "build_manifest.json").read_text("utf-8"))["configs"]
    data = {c: _load(version, c, tmp_path / "hf") for c in CONFIGS}
    assert len(data["seeds"]) == 4
    assert len(data["dialogues"]) == len(data["auto_labels"]) == 8
    assert len(data["curated"]) == len(data["benchmark"]) == 4

    dialogues = list(data["dialogues"])
    assert all(1 < len(d["turns"]) <= 4 for d in dialogues)
    assert all(d["turns"][0]["role"] == "user" for d in dialogues)
    assert all(t["text"].strip() for d in dialogues for t in d["turns"])
    with_bot_turns = {
        (d["language"], d["chatbot"]) for d in dialogues if any(t["role"] == "assistant" for t in d["turns"])
    }
    assert with_bot_turns == {(lang, bot) for lang in ("en", "de") for bot in CHATBOTS}
    assert {d["end_reason"] for d in dialogues} <= {"max_turns", "user_rejected", "empty_chatbot_response"}
    assert all(len(d["turns"]) == 4 for d in dialogues if d["end_reason"] == "max_turns")

    labels = list(data["auto_labels"])
    assert {r["judge_status"] for r in labels} == {"ok"}
    assert {r["rating"] for r in labels} <= {2.0, 3.0, 4.0, 5.0}
    assert {x["annotator"] for r in labels for x in r["labels"]} == {f"judge:{tmp_path / 'labeller.jsonl'}"}
    bench = list(data["benchmark"])
    assert {r["id"] for r in bench} == {r["id"] for r in data["curated"]}
    who = {
        lang: {x["annotator"] for r in bench if r["language"] == lang for x in r["labels"]}
        for lang in ("en", "de")
    }
    assert who == {"en": {"a1", "a2"}, "de": {"a1"}}

    # -- without the checkpoint, a rerun regenerates every dialogue from the request cache alone
    from dataset_builders.medal_pipeline.config import PipelineConfig
    from dataset_builders.medal_pipeline.pipeline import run_pipeline

    (work / "state.json").unlink()
    s3 = run_pipeline(PipelineConfig.load(cfg), progress=False).summary
    assert all(u["cached"] == u["requests"] > 0 for u in s3["generation"]["usage"].values())
    assert s3["generation"]["requests"] == s1["generation"]["requests"]
    assert json.loads((work / "state.json").read_text("utf-8"))["dialogues"] == state["dialogues"]
    assert _cache_rows(work) == n_cached


def test_tiny_labeller_parse_failures_are_counted_not_coerced(tmp_path, tiny_llama, tiny_qwen2, yes_model):
    # The Table 11 prompt alone is ~3,200 tokens of the tiny tokenizer, more than the tiny models'
    # 2,048 positions: max_length truncates it from the left (without it the build fails cleanly).
    labeller = f"hf:{tiny_qwen2},max_tokens=16,max_length=2000"
    cfg = _write_config(tmp_path, tiny_llama, tiny_qwen2, yes_model, labeller=labeller)
    reg, work = tmp_path / "reg", tmp_path / "work"
    out = _build(cfg, reg)
    assert "self-grades" in out  # the labeller is the tiny-qwen2 chatbot's model

    s = json.loads((work / "summary.json").read_text("utf-8"))
    assert s["labels"]["n"] == s["labels"]["parse_failures"] == 8
    assert s["labels"]["statuses"] == {"parse_error": 8}
    assert set(s["labels"]["none"].values()) == {8} and s["labels"]["overall_mean"] is None
    assert s["curation"]["excluded"] == {"unlabelled": 8}
    assert s["curation"]["selected"] == [] and s["curation"]["shortfall"] == {"en": 2, "de": 2}
    assert s["rows"]["curated"] == 0

    records = [json.loads(line) for line in (work / "publish" / "auto_labels.jsonl").open(encoding="utf-8")]
    assert len(records) == 8
    for r in records:
        assert r["judge_status"] == "parse_error" and r["judge_raw"]
        assert r["rating"] is None
        assert len(r["labels"]) == 10 and all(x["value"] is None and x["raw"] is None for x in r["labels"])
    # empty configs are not written: no curated.jsonl, no `curated` config, no sheets to fill
    assert not (work / "publish" / "curated.jsonl").exists()
    assert not [p for p in (work / "annotation-sheets").iterdir() if p.is_dir()]

    version = reg / "medal-tiny" / "1.0.0"
    assert _card_configs(version) == ["seeds", "dialogues", "auto_labels"]
    labels = _load(version, "auto_labels", tmp_path / "hf")
    assert all(r["rating"] is None for r in labels)
    assert all(x["value"] is None for r in labels for x in r["labels"])  # None, not 0, in the Parquet too
    assert len(_load(version, "dialogues", tmp_path / "hf")) == 8
