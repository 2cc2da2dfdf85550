"""Languages carried in a column: translations that share an id import (ids qualified by
language), ``--language`` selects those rows, and a selection that leaves nothing is an error."""

from __future__ import annotations

import datasets
import pytest

from dataset_builders.base import EmptyBuildError
from dataset_builders.importer.generic import GenericImporter
from tests.dataset_builders.importer.test_importer import inhouse_mapping, write_json

ROWS = [
    {"id": "w1", "lang": "en", "history": "user: hi", "response": "Hello!", "r": 4},
    {"id": "w1", "lang": "ES", "history": "user: hola", "response": "¡Hola!", "r": 4},
    {"id": "w1", "lang": "Chinese", "history": "user: 你好", "response": "你好！", "r": 4},
    {"id": "w2", "lang": "zh_CN", "history": "user: 再见", "response": "再见！", "r": 2},
]


@pytest.fixture
def importer() -> GenericImporter:
    return GenericImporter(inhouse_mapping(labels=[{"dimension": "overall", "column": "r"}]))


def _ids(out, tmp_path) -> dict[str, tuple[str, str]]:
    ds = datasets.load_dataset(str(out), "turn", split="test", cache_dir=str(tmp_path / "hf"))
    return {r["id"]: (r["item_id"], r["language"]) for r in ds}


def test_translations_sharing_ids_are_qualified_by_language(importer, tmp_path):
    write_json(tmp_path / "src" / "data.jsonl", ROWS, lines=True)
    res = importer.build(tmp_path / "src", tmp_path / "out", show_progress=False)
    assert _ids(tmp_path / "out", tmp_path) == {
        "w1-en": ("w1", "en"),
        "w1-es": ("w1", "es"),
        "w1-zh": ("w1", "zh"),
        "w2-zh-CN": ("w2", "zh-CN"),
    }
    assert any("<id>-<language>" in w for w in res.warnings)


def test_language_selection_reads_the_column(importer, tmp_path):
    write_json(tmp_path / "src" / "data.jsonl", ROWS, lines=True)
    res = importer.build(tmp_path / "src", tmp_path / "zh", languages="zh", show_progress=False)
    assert res.configs == {"turn": 2}
    assert {lang for _, lang in _ids(tmp_path / "zh", tmp_path).values()} == {"zh", "zh-CN"}
    with pytest.raises(
        EmptyBuildError, match=r"--language de selects no record.*en \(1\), es \(1\), zh \(1\)"
    ):
        importer.build(tmp_path / "src", tmp_path / "de", languages="de", show_progress=False)
    assert not (tmp_path / "de").exists()
