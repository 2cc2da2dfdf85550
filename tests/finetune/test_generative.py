"""finetune.generative: LoRA instruction tuning to Yes/No, adapter save/reload/merge, judged via the harness;
registered training-data versions as DATA (Table 3 conversion, held-out metrics, data version, errors)."""

from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest
import torch
import yaml
from typer.testing import CliRunner

from finetune.data import (
    Example,
    InstructionExample,
    SourceDialogue,
    coherence_pairs,
    load_training_data,
    register_training_data,
    relevance_pairs,
    split_by_dialogue,
    supervised_examples,
)
from finetune.data.generative import example_to_generative, load_generative_data
from finetune.generative import (
    GenerativeConfig,
    GenerativeExample,
    PromptEncoder,
    encode_examples,
    evaluate_generative,
    prompt_for_item,
    train_generative,
    xdial_prompt,
)
from finetune.lora import (
    ADAPTER_DIR,
    METADATA_FILE,
    LoraSettings,
    default_target_modules,
    load_lora_model,
    merge_adapter,
)
from finetune.trainer import TrainSettings
from harness.cache import RequestCache
from harness.data.schema import Dimension
from harness.judges import load_judge
from harness.tasks import get_task

TOPICS = ["cats", "dogs", "music", "food"]


def item(i: int, word: str) -> dict:
    return {
        "id": f"{word}-{i}",
        "language": "en",
        "dataset": "toy",
        "context": [{"role": "user", "text": f"hello , tell me about {TOPICS[i % 4]} ."}],
        "response": f"it is {word} .",
    }


ITEMS = [item(i, w) for i in range(4) for w in ("good", "bad")]


def examples(task) -> list[GenerativeExample]:
    return [
        GenerativeExample(prompt_for_item(task, it), "Yes" if "good" in it["response"] else "No")
        for it in ITEMS
    ]


def test_prompt_matches_table3_and_labels_only_the_answer(tiny_llama):
    task = get_task("xdial-eval-turn")
    p = prompt_for_item(task, ITEMS[0])
    assert p == xdial_prompt(
        "Given the following dialogue context and response, predict whether the response is relevant to the context.",
        "Dialogue Context:\nhello , tell me about cats .\n\nDialogue Response:\nit is good .",
    )
    enc = PromptEncoder(str(tiny_llama), chat_template="alpaca")
    rows, stats = encode_examples([GenerativeExample(p, "Yes")], enc, 512, train_eos=True)
    ids, labels = rows[0]["input_ids"], rows[0]["labels"]
    tok = enc.tokenizer
    prompt_ids = [t for t, lab in zip(ids, labels, strict=True) if lab == -100]
    assert tok.decode(prompt_ids).endswith("### Response:\n") and "Below is an instruction" in tok.decode(
        prompt_ids
    )
    assert [t for t in labels if t != -100] == [tok.convert_tokens_to_ids("Yes"), tok.eos_token_id]
    assert prompt_ids == ids[: len(prompt_ids)] and stats == {"truncated_prompts": 0, "answers": {"Yes": 1}}
    # the very ids the judge builds for the item's request
    from harness.backends.hf import HFBackend

    judge_backend = HFBackend(str(tiny_llama), chat_template="alpaca", device="cpu")
    assert enc.prompt_ids(p) == judge_backend.encode_prompt(
        judge_backend.render_prompt(task.build_request(ITEMS[0]))
    )
    chatml = PromptEncoder(str(tiny_llama))
    assert tok.decode(chatml.prompt_ids("hi", system="be brief")) == (
        "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )
    # prompts longer than max_length are cut from the left, like the judge's max_length
    rows, stats = encode_examples([GenerativeExample(p, "No")], enc, 10)
    assert (
        len(rows[0]["input_ids"]) == 10 and stats["truncated_prompts"] == 1 and rows[0]["labels"][-1] != -100
    )


def test_default_target_modules():
    assert default_target_modules("llama") == ["q_proj", "k_proj", "v_proj", "o_proj"]
    assert default_target_modules("qwen2") == ["q_proj", "k_proj", "v_proj", "o_proj"]
    assert default_target_modules("no-such-arch") == "all-linear"


def test_empty_examples_is_an_error(tmp_path, tiny_llama):
    with pytest.raises(ValueError, match="empty"):
        train_generative([], GenerativeConfig(base_model=str(tiny_llama)), tmp_path)


def test_train_save_judge_reload_merge(tmp_path, tiny_llama):
    task = get_task("xdial-eval-turn")
    cfg = GenerativeConfig(
        base_model=str(tiny_llama),
        lora=LoraSettings(r=8, alpha=16, dropout=0.0),
        train=TrainSettings(
            batch_size=8, max_steps=30, learning_rate=5e-3, checkpoint_every=100, log_every=10
        ),
    )
    data_version = {"name": "toy-good-bad", "version": "1", "fingerprint": "abc"}
    out = tmp_path / "run"
    meta = train_generative(examples(task), cfg, out, data_version, progress=False)

    # training: the loss goes down; only the adapter and metadata are written
    losses = meta["losses"]
    assert len(losses) == 30 and sum(losses[-5:]) / 5 < 0.2 * sum(losses[:5]) / 5
    adapter = out / ADAPTER_DIR
    assert {p.name for p in adapter.iterdir()} == {
        "adapter_config.json",
        "adapter_model.safetensors",
        "README.md",
        METADATA_FILE,
    }
    saved = json.loads((out / METADATA_FILE).read_text())
    assert saved == json.loads((adapter / METADATA_FILE).read_text())
    assert saved["kind"] == "generative-evaluator" and saved["base_model"] == str(tiny_llama)
    assert saved["base_revision"] is None and saved["training_data"]["fingerprint"] == "abc"
    assert saved["training_data"]["positives"] == saved["training_data"]["negatives"] == 4
    assert saved["adapter"]["r"] == 8 and saved["adapter"]["target_modules"] == [
        "k_proj",
        "o_proj",
        "q_proj",
        "v_proj",
    ]
    assert saved["hyperparameters"]["learning_rate"] == 5e-3 and saved["train_result"]["steps"] == 30
    assert saved["judge_spec"] == f"hf:{tiny_llama},adapter={adapter}"

    # the harness judge loads the adapter and P(Yes) separates the rule's two classes
    with load_judge(saved["judge_spec"], RequestCache(tmp_path / "c.sqlite")) as judge:
        assert judge.identity()["adapter_sha256"] == saved["adapter_sha256"]
        verdicts = judge.score(task, ITEMS)
    assert all(v.ok for v in verdicts)
    good = [v.score for v, it in zip(verdicts, ITEMS, strict=True) if "good" in it["response"]]
    bad = [v.score for v, it in zip(verdicts, ITEMS, strict=True) if "bad" in it["response"]]
    assert sum(good) / len(good) > 0.9 and sum(bad) / len(bad) < 0.1

    # reload with peft; the merged model gives the adapter model's logits
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    x = torch.tensor([[1, 20, 30, 40, 50, 60]])
    base = AutoModelForCausalLM.from_pretrained(str(tiny_llama), dtype=torch.float32)
    with torch.no_grad():
        base_logits = base(x).logits
        peft_model = PeftModel.from_pretrained(base, str(adapter)).eval()
        adapter_logits = peft_model(x).logits
    assert not torch.allclose(adapter_logits, base_logits, atol=1e-3)
    merged_dir = merge_adapter(adapter, tmp_path / "merged")
    merged = AutoModelForCausalLM.from_pretrained(str(merged_dir), dtype=torch.float32).eval()
    with torch.no_grad():
        torch.testing.assert_close(merged(x).logits, adapter_logits, atol=1e-4, rtol=1e-4)
    mmeta = json.loads((merged_dir / "dialeval_merged.json").read_text())
    assert mmeta["merged_from"] == str(adapter) and mmeta["judge_spec"] == f"hf:{merged_dir}"
    assert (merged_dir / "tokenizer.json").is_file()


def test_qwen2_alpaca_template_smoke(tmp_path, tiny_qwen2):
    task = get_task("xdial-eval-turn")
    cfg = GenerativeConfig(
        base_model=str(tiny_qwen2),
        chat_template="alpaca",
        train=TrainSettings(batch_size=4, max_steps=2, checkpoint_every=100),
    )
    meta = train_generative(examples(task)[:4], cfg, tmp_path, progress=False)
    assert meta["judge_spec"].endswith(",chat_template=alpaca") and meta["chat_template_name"] == "alpaca"
    assert (
        meta["train_result"]["steps"] == 2
        and (tmp_path / ADAPTER_DIR / "adapter_model.safetensors").is_file()
    )


# -- registered training-data versions as DATA ---------------------------------------------------------

RELEVANCE = Dimension("relevance", "is the response relevant to the context", "likert", 1, 5)


def human_records() -> list[dict]:
    """12 dialogues, each with a good (mean 4-5) and a bad (mean 1-2) response, graded."""
    out = []
    for d in range(12):
        ctx = [{"role": "user", "text": f"hello , tell me about {TOPICS[d % 4]} ."}]
        for word, mean in (("good", 4.0 + (d % 3) / 2), ("bad", 1.0 + (d % 3) / 2)):
            out.append(
                {
                    "id": f"r{d}-{word}",
                    "item_id": f"r{d}-{word}",
                    "dataset": "toy",
                    "language": "en",
                    "level": "turn",
                    "dialogue_id": f"dlg{d}",
                    "context": ctx,
                    "response": f"it is {word} .",
                    "response_role": "assistant",
                    "aggregates": [{"dimension": "relevance", "mean": mean, "n": 3}],
                }
            )
    return out


def register_human(root, name="rel-human", version="1.0.0"):
    ex = supervised_examples(human_records(), RELEVANCE)
    split = split_by_dialogue(ex, 0.25, seed=0)
    return register_training_data(
        split,
        name,
        version,
        registry_root=root,
        description="Toy human relevance.",
        source_manifest={"supervised": ex.report},
    )


def write_config(path, base, steps=40, **extra) -> str:
    cfg = {
        "base_model": str(base),
        "max_length": 256,
        "lora": {"r": 8, "alpha": 16, "dropout": 0.0},
        "train": {
            "batch_size": 6,
            "max_steps": steps,
            "learning_rate": 5e-3,
            "checkpoint_every": 100,
            "log_every": 5,
        },
        **extra,
    }
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def invoke(*args):
    from harness.cli import app

    return CliRunner().invoke(app, ["finetune", "generative", *map(str, args), "-q"])


def test_cli_trains_on_registered_version_and_evaluates_test_split(tmp_path, tiny_llama):
    root = tmp_path / "registry"
    reg = register_human(root)
    out = tmp_path / "run"
    r = invoke(write_config(tmp_path / "gen.yaml", tiny_llama), "rel-human@1.0.0", out, "--registry", root)
    assert r.exit_code == 0, r.output
    summary = json.loads(r.output[r.output.index("{") :])
    meta = json.loads((out / METADATA_FILE).read_text())
    assert meta == json.loads((out / ADAPTER_DIR / METADATA_FILE).read_text())
    assert summary["training_data"] == {
        "source": "rel-human@1.0.0",
        "name": "rel-human",
        "version": "1.0.0",
        "fingerprint": reg.fingerprint,
    }

    # the loss is recorded (metadata + train log) and goes down
    losses = meta["losses"]
    assert len(losses) == meta["train_result"]["steps"] == 40 and losses[-1] < 0.5 * losses[0]
    assert len((out / "train_log.jsonl").read_text().splitlines()) == 8

    # the data version: name, version, fingerprint, the split used and the Table 3 conversion
    data = meta["training_data"]
    assert (data["name"], data["version"], data["fingerprint"]) == ("rel-human", "1.0.0", reg.fingerprint)
    assert data["path"] == str(reg.path) and data["example_type"] == "example"
    assert data["train_split"] == "train" and data["eval_split"] == "test"
    assert (
        data["examples"] == reg.configs["train"] == 18 and data["eval_examples"] == reg.configs["test"] == 6
    )
    assert data["positives"] == data["negatives"] == 9 and data["kinds"] == {"human": 18}
    assert data["split"]["seed"] == 0 and "test_dialogues" not in data["split"]
    assert data["conversion"]["prompts"]["turn"]["template"] == "xdial-turn-relevance"
    assert data["conversion"]["threshold"] == 0.5 and data["languages"] == ["en"]
    assert meta["base_model"] == str(tiny_llama) and meta["base_revision"] is None
    assert meta["base_model_fingerprint"]

    # held-out metrics on the test split
    ev = meta["eval"]
    assert ev == summary["eval"] and ev["split"] == "test" and ev["n"] == 6
    assert ev["positives"] == ev["negatives"] == 3 and ev["loss"] > 0
    assert (
        ev["accuracy"] == pytest.approx(1.0)
        and ev["auc"] == pytest.approx(1.0)
        and ev["mean_p_yes_pos"] > 0.6 > 0.4 > ev["mean_p_yes_neg"]
    )
    assert ev["spearman"] > 0.5 and ev["pearson"] > 0.5  # graded labels

    # the adapter loads as the judge hf:<base>,adapter=<dir>, which gives the same P(Yes)
    assert meta["judge_spec"] == f"hf:{tiny_llama},adapter={out / ADAPTER_DIR}"
    test_ids = {e.id for e in load_training_data(reg.path, "test")}
    items = [r for r in human_records() if r["id"] in test_ids]
    with load_judge(meta["judge_spec"], RequestCache(tmp_path / "c.sqlite")) as judge:
        assert judge.identity()["adapter_sha256"] == meta["adapter_sha256"]
        verdicts = judge.score(get_task("xdial-eval-turn"), items)
    by_word = {
        w: [v.score for v, it in zip(verdicts, items, strict=True) if w in it["response"]]
        for w in ("good", "bad")
    }
    assert sum(by_word["good"]) / 3 == pytest.approx(ev["mean_p_yes_pos"], abs=1e-4)
    assert sum(by_word["bad"]) / 3 == pytest.approx(ev["mean_p_yes_neg"], abs=1e-4)


def test_held_out_p_yes_is_the_judges(tmp_path, tiny_llama):
    """evaluate_generative's P(Yes) = the hf judge's, on an untrained model (P(Yes) far from 0 / 1)."""
    cfg = GenerativeConfig(base_model=str(tiny_llama), chat_template="alpaca", eval_batch_size=3)
    task = get_task("xdial-eval-turn")
    exs = [example_to_generative(e) for e in supervised_examples(human_records()[:6], RELEVANCE)]
    model = load_lora_model(cfg.base_model, cfg.lora, dtype="float32")  # LoRA B = 0: the base model
    ev = evaluate_generative(model, exs, PromptEncoder(cfg.base_model, chat_template="alpaca"), cfg)
    with load_judge(
        f"hf:{tiny_llama},chat_template=alpaca,device=cpu,dtype=float32", RequestCache(tmp_path / "c.sqlite")
    ) as judge:
        scores = [v.score for v in judge.score(task, human_records()[:6])]
    pos = [s for s, e in zip(scores, exs, strict=True) if e.answer == "Yes"]
    neg = [s for s, e in zip(scores, exs, strict=True) if e.answer == "No"]
    assert 0.01 < ev["mean_p_yes_pos"] < 0.99 and ev["n"] == 6 and ev["loss"] > 0
    assert ev["mean_p_yes_pos"] == pytest.approx(sum(pos) / 3, abs=1e-5)
    assert ev["mean_p_yes_neg"] == pytest.approx(sum(neg) / 3, abs=1e-5)


def test_conversion_of_examples_to_table3_yes_no(tmp_path):
    dialogues = [
        SourceDialogue(
            f"d{i}", "en", [f"d{i} utterance {j}" for j in range(4)], ["user", "assistant"] * 2, "toy"
        )
        for i in range(6)
    ]
    split = split_by_dialogue(dialogues, 0.34, seed=0)
    root = tmp_path / "registry"
    train = relevance_pairs(split.train, seed=0) + coherence_pairs(split.train, seed=0)
    register_training_data(train, "selfsup", "1.0.0", registry_root=root, description="x", source_manifest={})
    data = load_generative_data("selfsup", registry_root=root)  # NAME = the latest version
    assert data.eval is None and data.version["eval_split"] is None and data.version["version"] == "1.0.0"
    assert len(data.train) == len(train)
    for ex, src in zip(data.train, train, strict=True):
        assert ex.answer == ("Yes" if src.label == 1 else "No") and ex.label == src.label and ex.id == src.id
        if src.level == "turn":
            item = {
                "language": "en",
                "context": [{"role": "user", "text": t} for t in src.context],
                "response": src.response,
            }
            assert ex.prompt == prompt_for_item("xdial-eval-turn", item)
        else:
            item = {
                "language": "en",
                "turns": [{"role": r, "text": t} for r, t in zip(src.roles, src.turns, strict=True)],
            }
            assert ex.prompt == prompt_for_item("xdial-eval-dialogue", item)
            assert "predict whether the dialogue is coherent?" in ex.prompt and "\n[H] " in ex.prompt
    # graded labels: Yes from 0.5 on; missing roles alternate, the human first
    ex = Example("x", "de", "dialogue", [], None, ["Hallo", "Hi", "Wie geht's?"], 0.5, "human", "dx")
    g = example_to_generative(ex)
    assert g.answer == "Yes" and g.prompt.endswith("### Input:\n[H] Hallo\n[C] Hi\n[H] Wie geht's?")
    assert (
        example_to_generative(Example("y", "en", "turn", ["a"], "b", None, 0.49, "human", "dy")).answer
        == "No"
    )
    assert example_to_generative(ex, ("Ja", "Nein")).answer == "Ja"
    # a wrong schema names the example and the field
    with pytest.raises(ValueError, match="example 'x': field 'roles' has 1 roles for 3 utterances"):
        example_to_generative(
            Example("x", "de", "dialogue", [], None, ["a", "b", "c"], 1, "human", "dx", ["user"])
        )
    with pytest.raises(ValueError, match="field 'response' is empty"):
        example_to_generative(Example("y", "en", "turn", ["a"], " ", None, 1, "human", "dy"))
    with pytest.raises(ValueError, match="field 'level' is 'utterance'"):
        example_to_generative(Example("z", "en", "utterance", ["a"], "b", None, 1, "human", "dz"))
    with pytest.raises(ValueError, match="field 'label' is None"):
        example_to_generative(Example("z", "en", "turn", ["a"], "b", None, None, "human", "dz"))


def test_distillation_version_trains_on_targets_and_reports_loss(tmp_path, tiny_llama):
    def ex(i: int) -> InstructionExample:
        return InstructionExample(
            f"m{i}",
            "en",
            f"dlg{i}",
            "You evaluate dialogues.",
            f"Rate dialogue {i}.",
            '{"overall_quality_rating": {"label": 4, "comment": ""}}',
            "medal",
            "abc",
        )

    reg = register_training_data(
        [ex(i) for i in range(4)],
        "distill",
        "1.0.0",
        test=[ex(9)],
        registry_root=tmp_path / "registry",
        description="x",
        source_manifest={},
    )
    out = tmp_path / "run"
    r = invoke(
        write_config(tmp_path / "gen.yaml", tiny_llama, steps=2), reg.path, out
    )  # the version's directory
    assert r.exit_code == 0, r.output
    meta = json.loads((out / METADATA_FILE).read_text())
    data, ev = meta["training_data"], meta["eval"]
    assert (
        data["example_type"] == "instruction"
        and "conversion" not in data
        and data["fingerprint"] == reg.fingerprint
    )
    assert data["positives"] == data["negatives"] == 0 and len(meta["losses"]) == 2
    assert ev["n"] == 1 and ev["loss"] > 0 and "not computed" in ev["p_yes"] and "accuracy" not in ev


def test_bad_data_errors_name_the_reference_and_field(tmp_path, tiny_llama):
    cfg = write_config(tmp_path / "gen.yaml", tiny_llama, steps=1)
    root = tmp_path / "registry"
    out = tmp_path / "run"

    def error(data, *extra) -> str:
        r = invoke(cfg, data, out, "--registry", root, *extra)
        assert r.exit_code == 2, r.output
        return " ".join(r.output.split())

    reg = register_human(root)
    assert "'rel-human@2.0.0'" in error("rel-human@2.0.0") and "versions: 1.0.0" in error("rel-human@2.0.0")
    assert "'nope@1.0.0'" in error("nope@1.0.0") and "no dataset 'nope'" in error("nope@1.0.0")
    assert "no such file" in error(tmp_path / "missing.jsonl")
    assert "no such file or directory" in error("no/such dir")
    # JSONL: the line and the field
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "p", "answer": "Yes"}\n{"prompt": "p"}\n')
    assert f"{bad}:2: field 'answer' is missing" in error(bad)
    bad.write_text('{"prompt": "p", "answer": ""}\n')
    assert "field 'answer' is not a non-empty string" in error(bad)
    bad.write_text("\n")
    assert "no examples" in error(bad)
    # a registered dataset that is not training data
    other = root / "common" / "1.0.0"
    other.mkdir(parents=True)
    (other / "build_manifest.json").write_text(json.dumps({"configs": {"main": {}}}))
    msg = error("common@1.0.0")
    assert "'common@1.0.0'" in msg and "'training_data'" in msg
    # an empty split
    empty = tmp_path / "empty-version"
    shutil.copytree(reg.path, empty)
    parquet = next((empty / "train").glob("*.parquet"))
    pq.write_table(pq.read_table(parquet).slice(0, 0), parquet)
    msg = error(empty)  # the manifest still counts 18 rows: the table cannot be read
    assert f"'{empty}', split 'train': cannot be read" in msg
    manifest = json.loads((empty / "build_manifest.json").read_text())
    manifest["configs"]["train"]["rows"] = 0
    (empty / "build_manifest.json").write_text(json.dumps(manifest))
    msg = error(empty)
    assert f"'{empty}': split 'train' has no examples" in msg
    # a label outside [0, 1]: names the example and the field
    wrong = Example("w1", "en", "turn", ["hi"], "hello", None, 3.0, "human", "dw")
    register_training_data([wrong], "wrong", "1.0.0", registry_root=root, description="x", source_manifest={})
    msg = error("wrong@1.0.0")
    assert "'wrong@1.0.0', split 'train': example 'w1': field 'label'" in msg and "outside [0, 1]" in msg
    assert not out.exists()  # nothing was trained
    with pytest.raises(ValueError, match="evaluation set is empty"):
        train_generative(
            [GenerativeExample("p", "Yes")],
            GenerativeConfig(base_model=str(tiny_llama)),
            out,
            eval_examples=[],
        )
