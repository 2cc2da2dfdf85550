"""Distillation examples from MEDAL auto labels, supervised examples from human labels, the split by
dialogue and the registry round trip of training data (finetune.data)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from datasets import load_dataset

from dataset_builders.medal_labels import MEDAL_ISSUES, MEDAL_OTHER, MEDAL_OVERALL_KEY
from dataset_builders.medal_pipeline.publish import dialogue_record
from dataset_builders.medal_pipeline.types import AutoLabel, Dialogue, Turn
from finetune.data import (
    Example,
    InstructionExample,
    SourceDialogue,
    TrainingDataError,
    coherence_pairs,
    distillation_examples,
    load_training_data,
    register_training_data,
    relevance_pairs,
    split_by_dialogue,
    supervised_examples,
)
from harness.data.registry import DatasetRegistry, VersionExistsError
from harness.data.schema import Dimension
from harness.parsing.issues_json import parse_issues

JUDGE = "judge:Qwen/Qwen3-8B"


# -- distillation ----------------------------------------------------------------------------------


def medal_dialogue(did: str, language: str = "en", n: int = 2) -> Dialogue:
    turns = []
    for i in range(n):
        turns.append(Turn("user", f"{did}: user turn {i}", "user-a"))
        turns.append(Turn("assistant", f"{did}: assistant turn {i}", "bot-a"))
    return Dialogue(did, f"seed-{did}", language, "user-a", "bot-a", turns, "end_of_dialogue")


def auto_label(did: str, overall: float | None = 4.0, **labels) -> AutoLabel:
    values = {name: 0 for name in (*MEDAL_ISSUES, MEDAL_OTHER)}
    values.update(labels)
    comments = {"irrelevant": "Switched topic.", "unsafe": "not an issue", MEDAL_OVERALL_KEY: "Mostly fine."}
    return AutoLabel(did, values, overall, comments, "ok" if overall is not None else "parse_error", "{...}")


def auto_records() -> list[dict]:
    recs = [
        dialogue_record(
            medal_dialogue("d1"), "auto_labels", {}, label=auto_label("d1", irrelevant=1), annotator=JUDGE
        ),
        dialogue_record(
            medal_dialogue("d2", "pt"),
            "auto_labels",
            {},
            label=auto_label("d2", 2.0, repetitive=1, incoherent=1),
            annotator=JUDGE,
        ),
        dialogue_record(
            medal_dialogue("d3"), "auto_labels", {}, label=auto_label("d3", None), annotator=JUDGE
        ),
        dialogue_record(
            medal_dialogue("d4"),
            "auto_labels",
            {},
            label=auto_label("d4", 5.0, nonfactual=None),
            annotator=JUDGE,
        ),
        dialogue_record(medal_dialogue("d5"), "auto_labels", {}),  # no judge labels at all
        dialogue_record(
            medal_dialogue("d6", "zh"), "auto_labels", {}, label=auto_label("d6", 5.0), annotator=JUDGE
        ),
    ]
    return recs


def test_distillation_skips_none_labels_and_counts():
    ex = distillation_examples(auto_records())
    rep = ex.report
    assert [e.id for e in ex] == ["d1", "d2", "d6"]
    assert (rep.read, rep.kept, rep.skipped_missing_labels, rep.skipped_no_judge) == (6, 3, 2, 1)
    assert rep.skipped_ids == {"missing_labels": ["d3", "d4"], "no_judge": ["d5"]}
    assert rep.missing_by_dimension == {"nonfactual": 1, "overall": 1}
    assert rep.annotators == {JUDGE: 3} and rep.languages == {"en": 1, "pt": 1, "zh": 1}


def test_distillation_prompt_and_table11_target():
    from tasks.medal import MEDAL_TASK
    from tasks.medal.templates import MEDAL_DIALOGUE_EVALUATION, MEDAL_SYSTEM

    recs = auto_records()
    ex = {e.id: e for e in distillation_examples(recs)}
    d1 = ex["d1"]
    # the prompt is exactly what the medal task sends at evaluation time
    request = MEDAL_TASK.build_request(recs[0])
    assert [m.content for m in request.messages] == [d1.system, d1.prompt]
    assert (
        d1.system == MEDAL_SYSTEM.format()
        and "user: d1: user turn 0\nassistant: d1: assistant turn 0" in d1.prompt
    )
    assert (
        d1.template == MEDAL_DIALOGUE_EVALUATION.name and d1.template_hash == MEDAL_DIALOGUE_EVALUATION.hash
    )
    # the target parses with the harness's own verdict parser and gives back the judge's labels
    obj = json.loads(d1.target)
    assert list(obj) == [*MEDAL_ISSUES, MEDAL_OTHER, MEDAL_OVERALL_KEY]
    assert all(set(v) == {"label", "comment"} for v in obj.values())
    assert obj["irrelevant"] == {"label": 1, "comment": "Switched topic."}
    assert obj["unsafe"] == {"label": 0, "comment": ""}  # Table 11: comments only for label 1
    assert obj[MEDAL_OVERALL_KEY] == {"label": 4, "comment": "Mostly fine."}
    assert d1.target.splitlines()[1] == '  "uninterpretable": { "label": 0, "comment": "" },'
    for e, rec in ((d1, recs[0]), (ex["d2"], recs[1])):
        verdict = parse_issues(e.target, (*MEDAL_ISSUES, MEDAL_OTHER), MEDAL_OVERALL_KEY)
        assert verdict.status == "ok"
        judge = {lab["dimension"]: lab["value"] for lab in rec["labels"]}
        assert verdict.overall == judge["overall"]
        assert verdict.labels == {k: int(judge[k]) for k in (*MEDAL_ISSUES, MEDAL_OTHER)}
    assert json.loads(ex["d2"].target)["incoherent"]["label"] == 1
    msgs = d1.messages()
    assert [m["role"] for m in msgs] == ["system", "user", "assistant"] and msgs[-1]["content"] == d1.target
    bare = distillation_examples(recs[:1], with_comments=False)[0]
    assert json.loads(bare.target)["irrelevant"]["comment"] == ""


def test_distillation_several_judges_need_annotator():
    rec = auto_records()[0]
    other = [dict(lab, annotator="judge:gpt-4.1") for lab in rec["labels"]]
    rec = {**rec, "labels": rec["labels"] + other}
    with pytest.raises(ValueError, match="several judges"):
        distillation_examples([rec])
    (e,) = distillation_examples([rec], annotator="judge:gpt-4.1")
    assert e.meta["annotator"] == "judge:gpt-4.1"
    human = {**rec, "id": "h", "labels": [dict(lab, annotator="ann1") for lab in auto_records()[0]["labels"]]}
    assert distillation_examples([human]).report.skipped_no_judge == 1


# -- supervised ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def upheld_records(tmp_path_factory):
    from dataset_builders.upheld.builder import UpheldBuilder
    from tests.fixtures.upheld_source import write_upheld_source

    tmp = tmp_path_factory.mktemp("upheld")
    out = tmp / "built"
    UpheldBuilder().build(write_upheld_source(tmp / "src", n_items=12), out, show_progress=False)
    return list(load_dataset(str(out), "main", split="test", cache_dir=str(tmp / "hf")))


def test_supervised_labels_are_normalised_means(upheld_records):
    content = supervised_examples(upheld_records, "content")
    assert len(content) == len(upheld_records) == content.report.kept
    rec = {r["id"]: r for r in upheld_records}
    for e in content:
        r = rec[e.id]
        agg = {a["dimension"]: a for a in r["aggregates"]}["content"]
        assert e.label == pytest.approx((agg["mean"] - 1) / 4) and 0.0 <= e.label <= 1.0
        assert e.level == "turn" and e.kind == "human" and e.response == r["response"]
        assert e.context == [m["text"] for m in r["context"]] and e.reference == r["reference"]
        assert e.roles == [*(m["role"] for m in r["context"]), r["response_role"]]
        assert e.source_id == r["dialogue_id"] and e.meta["n"] == 5
    style = supervised_examples(upheld_records, "style")
    for e in style:
        agg = {a["dimension"]: a for a in rec[e.id]["aggregates"]}["style"]
        assert e.label == pytest.approx((agg["mean"] - 1) / 2)  # Likert 1-3
    binary = supervised_examples(upheld_records, "content", threshold=0.75)
    assert {e.label for e in binary} <= {0, 1} and all(isinstance(e.label, int) for e in binary)
    assert [e.label for e in binary] == [int(e.label >= 0.75) for e in content]
    assert sum(binary.report.labels.values()) == len(binary)


def test_supervised_missing_ratings_unknown_dimension_and_dialogue_level(upheld_records):
    recs = [dict(r) for r in upheld_records[:4]]
    recs[1] = {**recs[1], "aggregates": [], "labels": [], "rating": None}
    recs[2] = {**recs[2], "aggregates": []}  # falls back to the individual labels
    ex = supervised_examples(recs, "reasonableness")
    assert ex.report.skipped_no_rating == 1 and ex.report.skipped_ids == [recs[1]["id"]]
    vals = [lab["value"] for lab in recs[2]["labels"] if lab["dimension"] == "reasonableness"]
    assert {e.id: e.label for e in ex}[recs[2]["id"]] == pytest.approx(sum(vals) / len(vals))
    with pytest.raises(ValueError, match="unknown dimension 'fluency'"):
        supervised_examples(recs, "fluency")
    with pytest.raises(ValueError, match="threshold"):
        supervised_examples(recs, "content", threshold=4)
    dial = {
        "id": "x",
        "item_id": "x",
        "dataset": "demo",
        "language": "de",
        "level": "dialogue",
        "dialogue_id": "dx",
        "turns": [{"role": "user", "text": "Hallo"}, {"role": "assistant", "text": "Hi"}],
        "rating": 4.0,
        "dimension": "quality",
        "labels": [],
        "aggregates": [],
    }
    quality = Dimension("quality", "overall quality", "likert", 1, 5)
    (e,) = supervised_examples([dial], quality)
    assert e.level == "dialogue" and e.turns == ["Hallo", "Hi"] and e.label == pytest.approx(0.75)
    assert e.roles == ["user", "assistant"] and e.source_id == "dx"
    with pytest.raises(ValueError, match="outside"):
        supervised_examples([{**dial, "rating": 7.0}], quality)


def test_split_by_dialogue_has_no_overlap(upheld_records):
    ex = supervised_examples(upheld_records, "content")
    dialogues = {e.source_id for e in ex}
    assert len(dialogues) == 12  # 6 systems per dialogue
    for seed in range(20):
        split = split_by_dialogue(ex, 0.25, seed)
        train, test = split
        assert train is split.train and test is split.test
        tr, te = {e.source_id for e in train}, {e.source_id for e in test}
        assert not tr & te and tr | te == dialogues and len(te) == 3
        assert len(train) + len(test) == len(ex)
        m = split.manifest
        assert set(m["test_dialogues"]) == te and set(m["train_dialogues"]) == tr and m["seed"] == seed
    a, b = split_by_dialogue(ex, 0.25, 1), split_by_dialogue(ex, 0.25, 1)
    assert a.manifest == b.manifest and [e.id for e in a.test] == [e.id for e in b.test]
    assert len({tuple(split_by_dialogue(ex, 0.25, s).manifest["test_dialogues"]) for s in range(10)}) > 1
    assert len(split_by_dialogue(ex, 0.01, 0).test) > 0  # at least one dialogue
    assert not split_by_dialogue(ex, 0.0, 0).test
    with pytest.raises(ValueError):
        split_by_dialogue(ex, 1.5, 0)


# -- registry round trip ------------------------------------------------------------------------------


def small_dialogues() -> list[SourceDialogue]:
    out = []
    for i in range(12):
        lang = "en" if i % 3 else "es"
        turns = [f"{lang} dialogue {i} utterance {j}" for j in range(3 + i % 3)]
        roles = ["user" if j % 2 == 0 else "assistant" for j in range(len(turns))]
        out.append(SourceDialogue(f"d{i}", lang, turns, roles, "test"))
    return out


def test_registry_round_trip_selfsup(tmp_path):
    dialogues = small_dialogues()
    split = split_by_dialogue(dialogues, 0.25, seed=0)
    train = relevance_pairs(split.train, seed=0) + coherence_pairs(split.train, seed=0)
    test = relevance_pairs(split.test, seed=0)
    root = tmp_path / "registry"
    manifest = {"dialogues": {"source": "synthetic", "license": "cc0-1.0"}, "relevance": {"seed": 0}}
    reg = register_training_data(
        train,
        "selfsup-test",
        "1.0.0",
        test=test,
        registry_root=root,
        description="Synthetic pairs.",
        source_manifest=manifest,
        split=split.manifest,
    )
    assert reg.path == root / "selfsup-test" / "1.0.0" and reg.configs == {
        "train": len(train),
        "test": len(test),
    }
    ds = load_dataset(str(reg.path), "train", split="test", cache_dir=str(tmp_path / "hf"))
    assert ds.num_rows == len(train) and set(ds.column_names) >= {
        "id",
        "label",
        "context",
        "response",
        "turns",
    }
    row = ds[0]
    assert row["id"] == train[0].id and row["label"] == float(train[0].label)
    assert [m["text"] for m in row["context"]] == train[0].context
    back = load_training_data(reg.path, cache_dir=tmp_path / "hf")
    assert back == list(train) and all(isinstance(e.label, int) for e in back)
    assert load_training_data(
        "selfsup-test@1.0.0", "test", registry_root=root, cache_dir=tmp_path / "hf"
    ) == list(test)
    man = reg.manifest
    td = man["training_data"]
    assert td["example_type"] == "example" and td["sources"] == manifest and td["split"] == split.manifest
    assert td["configs"]["train"]["label_type"] == "binary"
    assert td["configs"]["train"]["labels"]["0"] == td["configs"]["train"]["labels"]["1"]
    assert man["release"]["version"] == "1.0.0" and man["configs"]["train"]["rows"] == len(train)
    assert {i["config"] for i in man["inputs"]} == {"train", "test"} and all(
        i["sha256"] for i in man["inputs"]
    )
    assert td["license"] == "cc0-1.0"
    card = (reg.path / "README.md").read_text()
    assert (
        "config_name: train" in card and "license: cc0-1.0" in card and "Train/test split by dialogue" in card
    )
    with pytest.raises(VersionExistsError):
        register_training_data(
            train, "selfsup-test", "1.0.0", registry_root=root, description="x", source_manifest={}
        )
    assert DatasetRegistry(root).versions("selfsup-test") == ["1.0.0"]
    # exist_ok: the same data is reused as is (a rerun of a recipe); different data is refused
    again = register_training_data(
        train,
        "selfsup-test",
        "1.0.0",
        test=test,
        registry_root=root,
        description="Synthetic pairs.",
        source_manifest=manifest,
        split=split.manifest,
        exist_ok=True,
    )
    assert again.path == reg.path and again.fingerprint == reg.fingerprint
    assert json.loads((reg.path / "build_manifest.json").read_text())["created_at"] == man["created_at"]
    with pytest.raises(TrainingDataError, match="different data"):
        register_training_data(
            train[:-1],
            "selfsup-test",
            "1.0.0",
            test=test,
            registry_root=root,
            description="Synthetic pairs.",
            source_manifest=manifest,
            split=split.manifest,
            exist_ok=True,
        )
    assert DatasetRegistry(root).versions("selfsup-test") == ["1.0.0"]


def test_registry_round_trip_supervised_and_instructions(tmp_path, upheld_records):
    root = tmp_path / "registry"
    ex = supervised_examples(upheld_records, "content")
    split = split_by_dialogue(ex, 0.25, seed=3)
    reg = register_training_data(
        split,
        "upheld-content",
        "0.1.0",
        registry_root=root,
        description="UPHELD content.",
        source_manifest={"supervised": ex.report},
    )
    assert reg.manifest["training_data"]["split"]["test_dialogues"] == split.manifest["test_dialogues"]
    assert reg.manifest["training_data"]["configs"]["train"]["label_type"] == "continuous"
    back = load_training_data(reg.path, cache_dir=tmp_path / "hf")
    assert back == list(split.train) and back[0].reference == split.train[0].reference
    assert reg.manifest["training_data"]["sources"]["supervised"]["dimension"] == "content"

    distilled = distillation_examples(auto_records())
    reg2 = register_training_data(
        distilled,
        "medal-distill",
        "1.0.0",
        registry_root=root,
        description="MEDAL judge distillation.",
        source_manifest={"distill": distilled.report},
        license="cc-by-nc-sa-4.0",
    )
    back2 = load_training_data(reg2.path, cache_dir=tmp_path / "hf")
    assert back2 == list(distilled) and isinstance(back2[0], InstructionExample)
    ds = load_dataset(str(reg2.path), "train", split="test", cache_dir=str(tmp_path / "hf"))
    assert ds[0]["target"] == distilled[0].target and ds[0]["system"] == distilled[0].system


def test_register_rejects_bad_input(tmp_path):
    root = tmp_path / "registry"
    ok = Example("a", "en", "turn", ["hi"], "hello", None, 1, "positive", "d1")
    kw = {"registry_root": root, "description": "x", "source_manifest": {}}
    with pytest.raises(TrainingDataError, match="duplicate example id"):
        register_training_data([ok, ok], "bad", "1.0.0", **kw)
    with pytest.raises(TrainingDataError, match="in both train and test"):
        register_training_data(
            [ok], "bad", "1.0.0", test=[Example("b", "en", "turn", ["x"], "y", None, 0, "random", "d1")], **kw
        )
    with pytest.raises(TrainingDataError, match="kind"):
        register_training_data(
            [Example("a", "en", "turn", ["hi"], "hello", None, 1, "weird", "d1")], "bad", "1.0.0", **kw
        )
    with pytest.raises(TrainingDataError, match="language"):
        register_training_data(
            [Example("a", "qq", "turn", ["hi"], "hello", None, 1, "positive", "d1")], "bad", "1.0.0", **kw
        )
    with pytest.raises(TrainingDataError, match="no examples"):
        register_training_data([], "bad", "1.0.0", **kw)
    assert DatasetRegistry(root).versions("bad") == []  # nothing left behind
    # Topical-Chat-derived data inherits the source license from the load report
    reg = register_training_data(
        [ok],
        "lic",
        "1.0.0",
        registry_root=root,
        description="x",
        source_manifest={"load": {"license": "cdla-sharing-1.0"}},
    )
    assert "license: cdla-sharing-1.0" in (reg.path / "README.md").read_text()
    assert Counter(e.kind for e in load_training_data(reg.path, cache_dir=tmp_path / "hf")) == {"positive": 1}
