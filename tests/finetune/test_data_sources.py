"""The ``chitchat:`` dialogue source (finetune/data/sources/files.py): the Chit-Chat Challenge corpus of
the PyPI package ``chitchat-dataset``, and its bad-data errors."""

from __future__ import annotations

import json

import pytest

from finetune.data.sources import load_dialogues
from harness.data.schema import DataValidationError


def _conv(*turns):
    return {"messages": [[{"text": t, "sender": s, "timestamp": "x"} for t in ts] for s, ts in turns]}


def test_chitchat_turns_roles_and_counts(tmp_path):
    f = tmp_path / "dataset.json"
    data = {
        "c1": _conv(("a", ["Hello", "how are you?"]), ("b", ["fine"]), ("a", ["  ", "good"])),
        "c2": _conv(("a", ["anyone there?"])),  # one turn: no pair possible
        "c3": _conv(("x", ["hi"]), ("y", ["   "]), ("x", ["hello?"])),  # an empty turn is dropped
    }
    f.write_text(json.dumps(data), encoding="utf-8")
    ds = load_dialogues(f"chitchat:{f}")
    rep = ds.report
    assert [d.id for d in ds] == ["c1", "c3"]
    assert ds[0].turns == ["Hello how are you?", "fine", "good"]
    assert ds[0].roles == ["user", "assistant", "user"]
    assert ds[0].language == "en" and ds[0].origin == "chitchat:dataset.json"
    assert ds[1].turns == ["hi", "hello?"] and ds[1].roles == ["user", "user"]
    assert rep.read == 3 and rep.kept == 2 and rep.skipped_ids["one_turn"] == ["c2"]
    assert rep.empty_utterances_dropped == 1 and rep.license == "mit"
    assert rep.files[0]["path"] == str(f) and len(rep.files[0]["sha256"]) == 64


@pytest.mark.parametrize(
    ("conv", "field", "problem"),
    [
        ({"messages": "x"}, "messages", "not a list"),
        ({"messages": [[]]}, "messages.0", "non-empty list"),
        ({"messages": [[{"text": "a"}]]}, "messages.0.0.sender", "missing sender"),
        (
            {"messages": [[{"text": "a", "sender": "p"}, {"text": "b", "sender": "q"}]]},
            "messages.0.1.sender",
            "mixes senders",
        ),
        ({"messages": [[{"text": 3, "sender": "p"}]]}, "messages.0.0.text", "not a string"),
        (_conv(("p", ["a"]), ("q", ["b"]), ("r", ["c"])), "messages.2", "a third speaker"),
    ],
)
def test_chitchat_bad_data_names_file_dialogue_and_field(tmp_path, conv, field, problem):
    f = tmp_path / "d.json"
    f.write_text(json.dumps({"bad": conv}), encoding="utf-8")
    with pytest.raises(DataValidationError) as e:
        load_dialogues(f"chitchat:{f}")
    msg = str(e.value)
    assert str(f) in msg and "'bad'" in msg and field in msg and problem in msg


def test_chitchat_missing_file_and_bad_json(tmp_path):
    with pytest.raises(FileNotFoundError, match="chitchat: .* does not exist"):
        load_dialogues(f"chitchat:{tmp_path / 'none.json'}")
    f = tmp_path / "d.json"
    f.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(DataValidationError, match="expected an object"):
        load_dialogues(f"chitchat:{f}")


def test_chitchat_packaged_corpus():
    """The real corpus of the installed package: 7,168 conversations, 4,017 with a reply."""
    ds = load_dialogues("chitchat:")
    rep = ds.report
    assert rep.read == 7168 and rep.kept == 4017 and rep.skipped_one_turn == 3151
    assert rep.utterances_kept == sum(len(d.turns) for d in ds) > 130_000
    assert {d.language for d in ds} == {"en"} and rep.license == "mit"
    assert all(len(set(d.roles)) <= 2 for d in ds)
