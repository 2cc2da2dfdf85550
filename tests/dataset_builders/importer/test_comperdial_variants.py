"""The `comperdial` mapping on the record shapes a ComperDial release may have (its card names the
files, not their keys): a dict-shaped persona, dialogue items keyed by ``persona_id``, and the
error naming the mapping key when an item has no known speaker / text key."""

from __future__ import annotations

import copy
import json

import datasets
import pytest

from dataset_builders.importer.generic import GenericImporter
from harness.data.schema import DataValidationError
from tests.dataset_builders.importer.test_importer import CD_DIAL, CD_TURN, write_json


def _load(out, config, tmp_path) -> list[dict]:
    return datasets.load_dataset(str(out), config, split="test", cache_dir=str(tmp_path / "hf")).to_list()


def test_dict_persona_and_persona_id_speakers_import(tmp_path):
    turn, dial = copy.deepcopy(CD_TURN), copy.deepcopy(CD_DIAL)
    for rec in turn + dial:
        rec["persona"] = {"A": ["I have a dog."], "B": rec["persona"]}
    for rec in dial:
        rec["dialogue"] = [{"persona_id": u["speaker"], "text": u["text"]} for u in rec["dialogue"]]
    src = tmp_path / "ComperDial"
    write_json(src / "ComperDial_turn_level_evaluation.json", turn)
    write_json(src / "ComperDial_dialogue_level_evaluation.json", dial)
    out = tmp_path / "out"
    res = GenericImporter("comperdial").build(src, out, show_progress=False)
    assert res.configs == {"comperdial-turn": 3, "comperdial-dial": 2}
    t = _load(out, "comperdial-turn", tmp_path)[0]
    assert t["persona"].splitlines() == [
        "A: I have a dog.",
        "B: My name is Ana.",
        "B: I'm 31 years old.",
        "B: I love hiking.",
    ]
    d = _load(out, "comperdial-dial", tmp_path)[0]
    assert [m["role"] for m in d["turns"]] == ["user", "assistant", "user", "assistant"]
    assert d["turns"][1]["text"] == "Hello, I'm Ana."


def test_unknown_item_keys_name_the_mapping_key_to_set(tmp_path):
    dial = copy.deepcopy(CD_DIAL)
    dial[1]["dialogue"] = [{"who": "A", "text": "Hi!"}, {"who": "B", "text": "Turtles."}]
    src = tmp_path / "ComperDial"
    write_json(src / "ComperDial_dialogue_level_evaluation.json", dial)
    with pytest.raises(
        DataValidationError, match=r"record 2.*'dialogue'.*no 'speaker'.*\['text', 'who'\].*'speaker_key'"
    ):
        GenericImporter("comperdial").build(src, tmp_path / "out", show_progress=False)
    dial[1]["dialogue"] = [{"persona_id": "p17", "text": "Hi!"}]
    write_json(src / "ComperDial_dialogue_level_evaluation.json", dial)
    with pytest.raises(DataValidationError, match=r"unknown speaker 'p17'.*'turns\.speakers'"):
        GenericImporter("comperdial").build(src, tmp_path / "out", show_progress=False)


def test_skip_invalid_that_leaves_nothing_is_an_error_naming_why(tmp_path):
    from dataset_builders.base import EmptyBuildError

    src = tmp_path / "ComperDial"
    # a context that is not a list of utterances breaks the row (an off-scale label would only be an
    # odd cell: the row stays, with that label missing)
    write_json(src / "ComperDial_turn_level_evaluation.json", [{**r, "context": 123} for r in CD_TURN])
    with pytest.raises(
        EmptyBuildError,
        match=r"(?s)every source row was skipped \(3 skip.*3 x expected a list of utterances.*row 1",
    ):
        GenericImporter("comperdial").build(src, tmp_path / "out", show_progress=False, skip_invalid=True)
    assert not (tmp_path / "out").exists()
    assert json.loads(json.dumps(CD_TURN))  # the fixture itself is unchanged
