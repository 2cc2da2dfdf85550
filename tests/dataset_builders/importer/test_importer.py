"""GenericImporter on fixture files written in the ComperDial / DSTC11-track-4 / in-house layouts."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from dataset_builders.importer.generic import GenericImporter, MappingError, MappingSpec
from harness.data.schema import DIALOGUE_FEATURES, TURN_FEATURES

#: A wide CSV layout (one row per rated turn / dialogue) used to test row reading and errors.
WIDE_MAPPING = Path(__file__).parents[2] / "fixtures" / "importer" / "wide-turn-dial.yaml"

# -- fixtures in the ComperDial layout (see dataset_builders/importer/mappings/comperdial.yaml) -------------
PERSONA = ["My name is Ana.", "I'm 31 years old.", "I love hiking."]
CD_TURN = [
    {
        "dialogue_id": "d01",
        "turn_id": 2,
        "model_name": "sysA",
        "persona": PERSONA,
        "context": ["Hi! How was your weekend?", "Great, I went hiking.", "Where did you go?"],
        "response": "To the mountains near my town.",
        "gold_response": "I hiked up Mount Tam.",
        "score": [4, 5, 4],
    },
    {
        "dialogue_id": "d01",
        "turn_id": 2,
        "model_name": "sysB",
        "persona": PERSONA,
        "context": ["Hi! How was your weekend?", "Great, I went hiking.", "Where did you go?"],
        "response": "I like turtles.",
        "gold_response": "I hiked up Mount Tam.",
        "score": [1, 2, 3],
    },
    {
        "dialogue_id": "d02",
        "turn_id": 0,
        "model_name": "human1",
        "persona": PERSONA,
        "context": ["Hello there."],
        "response": "Hi, nice to meet you!",
        "gold_response": "Hello!",
        "score": 5,
    },
]
CD_DIAL = [
    {
        "dialogue_id": "d01",
        "model_name": "sysA",
        "persona": PERSONA,
        "score": [4, 4],
        "dialogue": [
            {"speaker": "A", "text": "Hi!"},
            {"speaker": "B", "text": "Hello, I'm Ana."},
            {"speaker": "A", "text": "Do you hike?"},
            {"speaker": "B", "text": "Every weekend."},
        ],
    },
    {
        "dialogue_id": "d01",
        "model_name": "sysB",
        "persona": PERSONA,
        "score": [2, 3],
        "dialogue": [{"speaker": "A", "text": "Hi!"}, {"speaker": "B", "text": "Turtles."}],
    },
]

# -- fixtures in the DSTC11 track 4 layout (CHANEL UID/SID/SEG + annotation columns) ---------------
DS_TURN_HEADER = [
    "UID",
    "SID",
    "CONTEXT",
    "SEG",
    "APPROPRIATENESS",
    "CONTENT_RICHNESS",
    "GRAMMATICAL_CORRECTNESS",
    "RELEVANCE",
]
DS_TURN = [
    [
        "CHATEV-000001-0003",
        "blenderbot",
        "Hi there\nHello! How are you?",
        "I'm fine, thanks.",
        "4.5",
        "3",
        "5",
        "4.25",
    ],
    [
        "CHATEV-000001-0005",
        "blenderbot",
        "Hi there\nHello!\nWhat do you do?\nI teach.",
        "Cool, what subject?",
        "4",
        "3.5",
        "5",
        "4",
    ],
    ["CHATEV-000002-0001", "gpt3", "Any plans today?", "The moon is cheese.", "1.5", "2", "4", "1"],
]
DS_DIAL_HEADER = ["DID", "SID", "DIALOGUE", "COHERENCE", "ENGAGENESS", "INFORMATIVENESS", "OVERALL"]
DS_DIAL = [
    [
        "CHATEV-000001",
        "blenderbot",
        "Hi there\nHello! How are you?\nGood.\nNice to hear.",
        "4",
        "3.5",
        "3",
        "4",
    ],
    ["CHATEV-000002", "gpt3", "Any plans today?\nThe moon is cheese.", "1", "1.5", "1", "1.25"],
]


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def write_json(path: Path, objs: list, *, lines: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(json.dumps(o) for o in objs) + "\n" if lines else json.dumps(objs, indent=1)
    path.write_text(text, encoding="utf-8")
    return path


def load(out: Path, config: str, tmp_path: Path):
    import datasets

    return datasets.load_dataset(str(out), config, split="test", cache_dir=str(tmp_path / "hf_cache"))


def card_front(out: Path) -> dict:
    text = (out / "README.md").read_text("utf-8")
    return yaml.safe_load(text.split("---\n")[1])


def manifest(out: Path) -> dict:
    return json.loads((out / "build_manifest.json").read_text("utf-8"))


@pytest.fixture
def comperdial_src(tmp_path) -> Path:
    src = tmp_path / "ComperDial"
    write_json(src / "ComperDial_turn_level_evaluation.json", CD_TURN)
    write_json(src / "ComperDial_dialogue_level_evaluation.json", CD_DIAL)
    return src


@pytest.fixture
def dstc11_src(tmp_path) -> Path:
    src = tmp_path / "DSTC_11_Track_4"
    write_csv(src / "test" / "chateval_turn_annotations.csv", DS_TURN_HEADER, DS_TURN)
    write_csv(src / "test" / "chateval_dial_annotations.csv", DS_DIAL_HEADER, DS_DIAL)
    return src


# -- happy paths -----------------------------------------------------------------------------------


def test_comperdial_layout_builds_loadable_configs(comperdial_src, tmp_path):
    out = tmp_path / "out"
    res = GenericImporter("comperdial").build(comperdial_src, out, show_progress=False)
    assert res.configs == {"comperdial-turn": 3, "comperdial-dial": 2}

    turn = load(out, "comperdial-turn", tmp_path)
    assert turn.features == TURN_FEATURES
    rows = {r["id"]: r for r in turn}
    r = rows["d01-2-sysA"]
    assert r["item_id"] == "d01-2" == rows["d01-2-sysB"]["item_id"]
    assert (r["dataset"], r["language"], r["level"], r["system"], r["dialogue_id"]) == (
        "comperdial-turn",
        "en",
        "turn",
        "sysA",
        "d01",
    )
    assert r["persona"] == "\n".join(PERSONA)
    assert [m["role"] for m in r["context"]] == ["user", "assistant", "user"]
    assert r["context"][0]["text"] == "Hi! How was your weekend?"
    assert r["response"] == "To the mountains near my town." and r["reference"] == "I hiked up Mount Tam."
    assert r["dimension"] == "overall" and r["rating"] == pytest.approx(13 / 3)
    assert [(lab["annotator"], lab["value"], lab["raw"]) for lab in r["labels"]] == [
        ("annotator1", 4.0, "4"),
        ("annotator2", 5.0, "5"),
        ("annotator3", 4.0, "4"),
    ]
    (agg,) = r["aggregates"]
    assert agg["dimension"] == "overall" and agg["n"] == 3 and agg["mean"] == pytest.approx(13 / 3)
    assert agg["aggregate"] == pytest.approx(13 / 15)  # sum / (n * max), UPHELD App. E.1
    assert agg["majority"] == 4.0 and agg["agreement"] == "majority"
    assert rows["d01-2-sysB"]["aggregates"][0]["agreement"] == "none"
    assert rows["d01-2-sysB"]["aggregates"][0]["majority"] is None
    single = rows["d02-0-human1"]  # a scalar score = one label named by `annotator:`
    assert single["labels"] == [{"annotator": "annotator", "dimension": "overall", "value": 5.0, "raw": "5"}]
    assert single["aggregates"][0]["agreement"] == "single" and single["context"][0]["role"] == "user"

    dial = load(out, "comperdial-dial", tmp_path)
    assert dial.features == DIALOGUE_FEATURES
    d = {r["id"]: r for r in dial}["d01-sysA"]
    assert [m["role"] for m in d["turns"]] == ["user", "assistant", "user", "assistant"]
    assert d["turns"][1]["text"] == "Hello, I'm Ana." and d["rating"] == 4.0
    assert d["aggregates"][0]["agreement"] == "full" and d["aggregates"][0]["aggregate"] == pytest.approx(0.8)

    front = card_front(out)
    assert [c["config_name"] for c in front["configs"]] == ["comperdial-turn", "comperdial-dial"]
    assert front["configs"][0]["data_files"] == [
        {"split": "test", "path": "comperdial-turn/test-00000-of-00001.parquet"}
    ]
    assert front["license"] == "cc-by-nc-sa-4.0" and front["pretty_name"] == "ComperDial"
    card = (out / "README.md").read_text("utf-8")
    assert "## Import" in card and "comperdial.yaml" in card and "Very bad" in card
    man = manifest(out)
    assert man["builder"] == {"name": "comperdial", "version": "0.1.0"}
    assert man["skipped"] == {"count": 0, "rows": []}
    assert (
        man["configs"]["comperdial-turn"]["rows"] == 3 and man["configs"]["comperdial-turn"]["instances"] == 2
    )
    assert [i["file"] for i in man["inputs"]] == [
        "ComperDial_turn_level_evaluation.json",
        "ComperDial_dialogue_level_evaluation.json",
    ]
    assert man["dimensions"][0]["name"] == "overall" and man["dimensions"][0]["max"] == 5
    assert man["options"]["mapping"] == "comperdial" and len(man["options"]["mapping_sha256"]) == 64


def test_dstc11_layout_csv_and_parquet(dstc11_src, tmp_path):
    # the same turn-level rows as Parquet must give the same records
    pq_src = tmp_path / "pq"
    table = pa.Table.from_pylist([dict(zip(DS_TURN_HEADER, r, strict=True)) for r in DS_TURN])
    pq_src.mkdir()
    pq.write_table(table, pq_src / "chateval_turn.parquet")
    mapping = yaml.safe_load(WIDE_MAPPING.read_text())
    mapping["configs"][0]["files"] = ["*turn*.parquet"]
    GenericImporter(mapping).build(pq_src, tmp_path / "out_pq", show_progress=False)

    out = tmp_path / "out"
    res = GenericImporter(WIDE_MAPPING).build(dstc11_src, out, show_progress=False)
    assert res.configs == {"dstc11-turn": 3, "dstc11-dial": 2}
    turn = load(out, "dstc11-turn", tmp_path)
    r = turn[1]
    assert (
        r["id"] == "CHATEV-000001-0005"
        and r["dialogue_id"] == "CHATEV-000001"
        and r["system"] == "blenderbot"
    )
    assert [m["role"] for m in r["context"]] == ["assistant", "user", "assistant", "user"]
    assert (
        r["response"] == "Cool, what subject?" and r["dimension"] == "appropriateness" and r["rating"] == 4.0
    )
    assert {lab["dimension"]: lab["value"] for lab in r["labels"]} == {
        "appropriateness": 4.0,
        "content_richness": 3.5,
        "grammatical_correctness": 5.0,
        "relevance": 4.0,
    }
    assert {lab["annotator"] for lab in r["labels"]} == {"mean"}
    assert [a["dimension"] for a in r["aggregates"]] == [
        "appropriateness",
        "content_richness",
        "grammatical_correctness",
        "relevance",
    ]
    assert r["aggregates"][1] == {
        "dimension": "content_richness",
        "n": 1,
        "mean": 3.5,
        "aggregate": 0.7,
        "majority": 3.5,
        "agreement": "single",
    }
    assert load(tmp_path / "out_pq", "dstc11-turn", tmp_path).to_list() == turn.to_list()

    dial = load(out, "dstc11-dial", tmp_path)
    assert dial[0]["turns"][0] == {"role": "user", "text": "Hi there"} and dial[0]["rating"] == 4.0
    assert dial[1]["dimension"] == "overall" and dial[1]["rating"] == pytest.approx(1.25)
    assert [c["config_name"] for c in card_front(out)["configs"]] == ["dstc11-turn", "dstc11-dial"]


# -- in-house layouts: wide JSONL with one column per rater, long CSV with one row per label --------
DIMS = [
    {"name": "overall", "scale": "likert", "min": 1, "max": 5},
    {"name": "relevant", "scale": "binary", "labels": {0: "no", 1: "yes"}},
]


def inhouse_mapping(**config) -> dict:
    base = {
        "name": "turn",
        "level": "turn",
        "files": ["*.jsonl"],
        "language_column": "lang",
        "id": "id",
        "context": {"column": "history", "roles": "prefixed"},
        "response": "response",
    }
    return {"name": "inhouse", "dimensions": DIMS, "configs": [{**base, **config}]}


WIDE = [
    {
        "id": "w1",
        "lang": "en",
        "history": ["user: hi", "assistant: hello!", "user: any tips?"],
        "response": "Drink water.",
        "rater_ann": "4",
        "rater_bob": 5,
        "rater_cy": "",
        "rel": "Yes",
    },
    {
        "id": "w2",
        "lang": "pt-BR",
        "history": "user: oi",
        "response": "Olá!",
        "rater_ann": 3,
        "rater_bob": 3,
        "rater_cy": 3,
        "rel": "No",
    },
]


def test_wide_jsonl_with_rater_columns_value_map_and_languages(tmp_path):
    write_json(tmp_path / "src" / "data.jsonl", WIDE, lines=True)
    labels = [
        {"dimension": "overall", "columns": "rater_*", "annotator_from": "column_suffix"},
        {"dimension": "relevant", "column": "rel", "annotator": "mean", "value_map": {"yes": 1, "no": 0}},
    ]
    imp = GenericImporter(inhouse_mapping(labels=labels))
    out = tmp_path / "out"
    imp.build(tmp_path / "src", out, show_progress=False)
    rows = load(out, "turn", tmp_path)
    w1 = rows[0]
    assert [m["role"] for m in w1["context"]] == ["user", "assistant", "user"]
    assert w1["context"][1]["text"] == "hello!"
    # rater_cy is empty: no label
    assert [(lab["annotator"], lab["dimension"], lab["value"]) for lab in w1["labels"]] == [
        ("ann", "overall", 4.0),
        ("bob", "overall", 5.0),
        ("mean", "relevant", 1.0),
    ]
    assert w1["labels"][2]["raw"] == "Yes" and w1["rating"] == 4.5
    assert rows[1]["language"] == "pt-BR" and rows[1]["aggregates"][0]["agreement"] == "full"
    assert card_front(out)["configs"][0]["config_name"] == "turn"

    imp.build(tmp_path / "src", out, show_progress=False, languages=["pt-BR"])
    assert load(out, "turn", tmp_path)["id"] == ["w2"]
    # the CLI normalizes first and passes the result on: () means every language
    assert imp.normalize_languages(None) == () == imp.normalize_languages(())
    assert imp.normalize_languages("english, pt-BR") == ("en", "pt-BR")


LONG_HEADER = ["item", "dialogue", "reply", "worker", "aspect", "score"]
LONG = [
    ["i1", "Hi\nHey, how can I help?\nA recipe please", "Try pancakes.", "w1", "Overall", "5"],
    ["i1", "", "", "w2", "Overall", "4"],
    ["i1", "", "", "w1", "Relevant", "1"],
    ["i1", "", "", "w3", "Fluency", "3"],  # an aspect the mapping ignores (mapped to null)
    ["i2", "Hello", "Bye.", "w1", "Overall", "2"],
]


def long_mapping() -> dict:
    return {
        "name": "inhouse-long",
        "dimensions": DIMS,
        "configs": [
            {
                "name": "long",
                "level": "turn",
                "files": "*.csv",
                "language": "en",
                "id": "item",
                "context": "dialogue",
                "response": "reply",
                "headline": "overall",
                "long_labels": {
                    "annotator_column": "worker",
                    "dimension_column": "aspect",
                    "value_column": "score",
                    "dimension_map": {"Overall": "overall", "Relevant": "relevant", "Fluency": None},
                },
            }
        ],
    }


def test_long_format_groups_labels_by_id(tmp_path):
    write_csv(tmp_path / "src" / "long.csv", LONG_HEADER, LONG)
    out = tmp_path / "out"
    mapping = long_mapping()
    mapping["configs"][0]["expected_instances"] = 3
    res = GenericImporter(mapping).build(tmp_path / "src", out, show_progress=False)
    assert res.warnings == ["long: 2 instances (item ids) read, the mapping expects 3"]
    assert manifest(out)["configs"]["long"]["expected_instances"] == 3
    rows = load(out, "long", tmp_path)
    assert rows["id"] == ["i1", "i2"]
    i1 = rows[0]
    assert [(lab["annotator"], lab["dimension"], lab["value"]) for lab in i1["labels"]] == [
        ("w1", "overall", 5.0),
        ("w2", "overall", 4.0),
        ("w1", "relevant", 1.0),
    ]
    assert i1["rating"] == pytest.approx(4.5) and [a["n"] for a in i1["aggregates"]] == [2, 1]
    assert (
        i1["aggregates"][1]["aggregate"] == pytest.approx(1.0) and i1["aggregates"][0]["agreement"] == "none"
    )


def test_hub_source_with_a_local_dataset_directory(tmp_path):
    hub_dir = write_csv(tmp_path / "hubrepo" / "data.csv", DS_TURN_HEADER, DS_TURN).parent
    mapping = yaml.safe_load(WIDE_MAPPING.read_text())
    mapping["configs"] = [{**mapping["configs"][0], "files": ["train.parquet"]}]
    out = tmp_path / "out"
    imp = GenericImporter(mapping, cache_dir=tmp_path / "hf_hub_cache")
    res = imp.build(f"hub:{hub_dir}", out, show_progress=False)
    assert res.configs == {"dstc11-turn": 3}
    assert manifest(out)["inputs"][0]["source"] == f"hub:{hub_dir}/train.parquet"
    assert load(out, "dstc11-turn", tmp_path)[2]["response"] == "The moon is cheese."


def test_single_file_source_and_shipped_mapping_names(dstc11_src, tmp_path):
    f = dstc11_src / "test" / "chateval_dial_annotations.csv"
    res = GenericImporter(WIDE_MAPPING).build(f, tmp_path / "out", show_progress=False)
    assert res.configs == {"dstc11-dial": 2}
    assert any("dstc11-turn" in w for w in res.warnings)
    with pytest.raises(MappingError, match="neither a YAML file nor a shipped mapping.*comperdial"):
        GenericImporter("no-such-mapping")


def test_mapping_errors_name_the_yaml_file_and_key(tmp_path):
    bad = long_mapping()
    bad["configs"][0]["long_labels"]["annotator_colum"] = bad["configs"][0]["long_labels"].pop(
        "annotator_column"
    )
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad), encoding="utf-8")
    with pytest.raises(MappingError) as ei:
        GenericImporter(path)
    msg = str(ei.value)
    assert str(path) in msg and "configs[0] (long).long_labels.annotator_column" in msg
    assert "configs[0] (long).long_labels.annotator_colum:" in msg  # the misspelt key
    bad = long_mapping()
    bad["configs"][0]["headline"] = "fluency"
    path.write_text(yaml.safe_dump(bad), encoding="utf-8")
    with pytest.raises(MappingError, match=r"bad\.yaml.*configs\[0\] \(long\).*'fluency'"):
        MappingSpec.load(path)
