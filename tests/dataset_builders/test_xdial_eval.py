"""XDialEvalBuilder: on the real xDial-Eval CSVs in ../shared/data (skipped when absent) and on
small CSVs written by the tests."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pytest
import yaml

import dataset_builders.xdial_eval as xmod
from dataset_builders.helpers import LANGUAGE_NAMES, LANGUAGES
from dataset_builders.xdial_eval import EXPECTED_INSTANCES, XDIAL_SETS, XDialEvalBuilder
from harness.data.builders import build_dataset
from harness.data.schema import DIALOGUE_FEATURES, TURN_FEATURES

# Table 1 of the paper, for the sets present in ../shared/data/xdial-eval.
TABLE1_PRESENT = {
    "conture-turn": 1066,
    "convai2-grade": 600,
    "dailydialog-grade": 300,
    "dailydialog-zhao": 900,
    "fed-turn": 375,
    "persona-usr": 300,
    "conture-dial": 119,
    "fed-dial": 125,
}


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n", 2)[1])


def _load(out: Path, config: str, cache: Path):
    import datasets

    return datasets.load_dataset(str(out), config, split="test", cache_dir=str(cache))


# -- the Table 1 mapping ---------------------------------------------------------------------------


def test_table1_mapping():
    assert len([s for s in XDIAL_SETS if s.level == "turn"]) == 12
    assert len([s for s in XDIAL_SETS if s.level == "dialogue"]) == 6
    assert sum(s.instances for s in XDIAL_SETS if s.level == "turn") == 14930  # paper: 14930 turns
    assert sum(s.instances for s in XDIAL_SETS if s.level == "dialogue") == 8691  # and 8691 dialogues
    for stem, n in TABLE1_PRESENT.items():
        assert EXPECTED_INSTANCES[stem] == n
    heval = xmod.SETS_BY_STEM["heval-dial"]
    assert heval.level == "dialogue" and heval.url.endswith("/data/turn/heval-dial.csv")
    assert xmod.SETS_BY_STEM["fed-dial"].url == (
        "https://raw.githubusercontent.com/e0397123/xDial-Eval/main/data/dial/fed-dial.csv"
    )


# -- the real data ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built(xdial_source, tmp_path_factory):
    out = tmp_path_factory.mktemp("xdial") / "xdial-eval"
    res = XDialEvalBuilder().build(xdial_source, out, show_progress=False)
    return res, out


def _present_stems(xdial_source: Path) -> set[str]:
    return {p.stem for p in xdial_source.glob("*/*.csv")}


@pytest.mark.shared_data
def test_instance_counts_match_table1(built, xdial_source):
    res, _ = built
    present = _present_stems(xdial_source)
    assert present and present <= set(TABLE1_PRESENT)
    assert set(res.configs) == present
    for config, rows in res.configs.items():
        entry = res.manifest["configs"][config]
        assert entry["instances"] == TABLE1_PRESENT[config] == entry["expected_instances"]
        assert rows == entry["rows"] == 10 * TABLE1_PRESENT[config] == entry["expected_rows"]
        assert entry["languages"] == list(LANGUAGES)
    # counts all match, so the only warnings are about absent sets / translation quirks
    assert not any("reference count" in w for w in res.warnings)


@pytest.mark.shared_data
def test_every_config_loads_with_datasets(built, hf_cache):
    res, out = built
    for config, rows in res.configs.items():
        ds = _load(out, config, hf_cache)
        level = res.manifest["configs"][config]["level"]
        assert len(ds) == rows
        assert ds.features == (TURN_FEATURES if level == "turn" else DIALOGUE_FEATURES)
        assert set(ds.unique("language")) == set(LANGUAGES)
        assert set(ds.unique("dataset")) == {config} and set(ds.unique("level")) == {level}
        assert set(ds.unique("dimension")) == {"relevance" if level == "turn" else "coherence"}
        assert len(set(ds["id"])) == rows
        assert len(set(ds["item_id"])) == TABLE1_PRESENT[config]


@pytest.mark.shared_data
def test_turn_context_split_and_roles(built, hf_cache, xdial_source):
    _, out = built
    raw = _read_csv(xdial_source / "turn" / "fed-turn.csv")
    ds = _load(out, "fed-turn", hf_cache)
    by_id = {r["id"]: r for r in ds}
    for row_no in (1, 17, len(raw)):
        for lang in ("en", "zh", "ar"):
            name = LANGUAGE_NAMES[lang]
            rec = by_id[f"fed-turn-{row_no:05d}-{lang}"]
            expected_ctx = [u.strip() for u in raw[row_no - 1][f"{name}_ctx"].strip("\n").split("\n")]
            assert [m["text"] for m in rec["context"]] == expected_ctx
            assert rec["response"] == raw[row_no - 1][f"{name}_res"].strip()
            assert rec["rating"] == float(raw[row_no - 1]["ratings"])
            assert rec["item_id"] == f"fed-turn-{row_no:05d}"
    # every context ends with the user and alternates; the response is the assistant's
    for rec in ds:
        roles = [m["role"] for m in rec["context"]]
        assert roles[-1] == "user"
        assert all(a != b for a, b in zip(roles, roles[1:], strict=False))
        assert all(m["text"] for m in rec["context"])
    en1 = by_id["fed-turn-00001-en"]
    assert en1["context"][0]["text"] == "Hi!"
    # FED: the human opens the conversation; 9 context utterances -> the first is the user's
    assert len(en1["context"]) % 2 == 1 and en1["context"][0]["role"] == "user"


@pytest.mark.shared_data
def test_dialogue_leading_blank_line_stripped(built, hf_cache, xdial_source):
    _, out = built
    raw = _read_csv(xdial_source / "dial" / "fed-dial.csv")
    assert raw[0]["english_dial"].startswith("\n")  # the quirk being handled
    ds = _load(out, "fed-dial", hf_cache)
    by_id = {r["id"]: r for r in ds}
    rec = by_id["fed-dial-00001-en"]
    expected = [u.strip() for u in raw[0]["english_dial"].strip("\n").split("\n")]
    assert [t["text"] for t in rec["turns"]] == expected
    assert rec["turns"][0] == {"role": "user", "text": "Hi!"}
    assert rec["turns"][1]["role"] == "assistant"
    for r in ds:
        assert r["turns"][0]["text"] != ""
        assert [t["role"] for t in r["turns"]] == [
            "user" if i % 2 == 0 else "assistant" for i in range(len(r["turns"]))
        ]


@pytest.mark.shared_data
def test_card_yaml_lists_every_config(built):
    res, out = built
    card = (out / "README.md").read_text(encoding="utf-8")
    front = _front_matter(card)
    assert [c["config_name"] for c in front["configs"]] == list(res.configs)
    for c in front["configs"]:
        assert c["data_files"] == [
            {"split": "test", "path": f"{c['config_name']}/test-00000-of-00001.parquet"}
        ]
        assert (out / c["data_files"][0]["path"]).is_file()
    assert front["license"] == "gpl-3.0"
    assert front["language"] == list(LANGUAGES)
    assert "text-classification" in front["task_categories"]
    assert "dialogue-evaluation" in front["tags"]
    assert front["size_categories"] == ["10K<n<100K"]
    assert front["pretty_name"] == "xDial-Eval"
    body = card.split("---\n", 2)[2]
    for needle in (
        "## Schema",
        "## Statistics",
        "## Provenance",
        "inferred",
        "own licenses",
        "@inproceedings",
        "rating",
    ):
        assert needle in body, needle
    for config in res.configs:
        assert f"### `{config}`" in body


@pytest.mark.shared_data
def test_manifest_hashes_match_inputs(built, xdial_source):
    res, out = built
    manifest = json.loads((out / "build_manifest.json").read_text())
    assert manifest["builder"] == {"name": "xdial-eval", "version": XDialEvalBuilder.version}
    assert manifest["fingerprint"] == res.fingerprint
    assert {i["config"] for i in manifest["inputs"]} == set(res.configs)
    for i in manifest["inputs"]:
        path = Path(i["source"])
        assert path.is_file() and path.resolve().is_relative_to(xdial_source.resolve())
        assert i["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert i["size"] == path.stat().st_size
    for config, entry in manifest["configs"].items():
        assert entry["expected_instances"] == TABLE1_PRESENT[config]
        assert entry["rows"] == res.configs[config]


@pytest.mark.shared_data
def test_missing_sets_are_warned(built, xdial_source):
    res, _ = built
    missing = [s.stem for s in XDIAL_SETS if s.stem not in _present_stems(xdial_source)]
    assert missing
    warning = next(w for w in res.warnings if "not present in the source" in w)
    for stem in missing:
        assert stem in warning
    assert warning in res.manifest["warnings"]


@pytest.mark.shared_data
def test_rebuild_gives_same_fingerprint_and_files(built, xdial_source, tmp_path):
    res, out = built
    again = XDialEvalBuilder().build(xdial_source, tmp_path / "again", show_progress=False)
    assert again.fingerprint == res.fingerprint
    for config in res.configs:
        rel = f"{config}/test-00000-of-00001.parquet"
        assert (out / rel).read_bytes() == (tmp_path / "again" / rel).read_bytes()


@pytest.mark.shared_data
def test_languages_subset(xdial_source, tmp_path, hf_cache):
    out = tmp_path / "enzh"
    res = build_dataset("xdial-eval", xdial_source, out, languages=["en", "zh"], show_progress=False)
    for config, rows in res.configs.items():
        assert rows == 2 * TABLE1_PRESENT[config]
        assert res.manifest["configs"][config]["languages"] == ["en", "zh"]
    assert _front_matter((out / "README.md").read_text())["language"] == ["en", "zh"]
    ds = _load(out, "fed-dial", hf_cache)
    assert set(ds.unique("language")) == {"en", "zh"}
    assert res.manifest["options"] == {"languages": ["en", "zh"], "skip_invalid": False}


@pytest.mark.shared_data
def test_flat_source_directory(xdial_source, tmp_path):
    """CSVs directly in --source (no turn/ dial/ folders) are accepted."""
    flat = tmp_path / "flat"
    flat.mkdir()
    for name in ("fed-turn", "fed-dial"):
        sub = "dial" if name.endswith("dial") else "turn"
        (flat / f"{name}.csv").symlink_to(xdial_source / sub / f"{name}.csv")
    res = XDialEvalBuilder().build(flat, tmp_path / "out", languages=["en"], show_progress=False)
    assert res.configs == {"fed-turn": 375, "fed-dial": 125}
    assert res.manifest["configs"]["fed-dial"]["level"] == "dialogue"
