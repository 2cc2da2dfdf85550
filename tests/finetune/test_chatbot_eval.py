"""harness chatbot-eval: held-out next-turn generation scored against the withheld human turn
(UPHELD App. B.1) — replay chatbots + ROUGE-L, the cache, errors, a real LoRA SFT effect, UPHELD data."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from finetune.chatbot_eval import ChatbotEvalConfig, run_chatbot_eval
from finetune.data.targets import load_targets
from harness.cli import app

runner = CliRunner()

DIALOGUES = [
    {
        "id": "d1",
        "language": "en",
        "turns": [
            {"role": "user", "text": "hello , tell me something about yourself !"},
            {"role": "assistant", "text": "i am 56 years old and i am a housekeeper ."},
            {"role": "user", "text": "do you have any hobbies or interests ?"},
            {"role": "assistant", "text": "i like to read and write poetry ."},
        ],
    },
    # plain strings alternate user / assistant; no id -> "line-2"
    {"turns": ["Wie geht es dir?", "Ça va très bien, merci.", "¿Cómo estás?"]},
    # the SFT data format: a bare list of turns (roles normalised: human / bot)
    [{"role": "human", "text": "Привет, как дела?"}, {"role": "bot", "text": "Muy bien, gracias."}],
]
REFERENCES = [
    "i am 56 years old and i am a housekeeper .",
    "i like to read and write poetry .",
    "Ça va très bien, merci.",
    "Muy bien, gracias.",
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def echo_replay(path, targets):
    """A replay chatbot that answers every target with its reference (matched on the last turn)."""
    rules = [
        {
            "match": re.escape(f"{t.context[-1]['role']}: {t.context[-1]['text']}") + "$",
            "response": {"text": t.reference},
        }
        for t in targets
    ]
    return write_jsonl(path, rules)


def test_targets_limit_context_and_sources(tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", DIALOGUES)
    targets, info = load_targets(data)
    assert [t.id for t in targets] == ["d1#1", "d1#3", "line-2#1", "line-3#1"]
    assert [t.reference for t in targets] == REFERENCES and info["kind"] == "jsonl"
    assert targets[1].context[-1] == {"role": "user", "text": "do you have any hobbies or interests ?"}
    assert len(targets[1].context) == 3 and targets[3].context == [
        {"role": "user", "text": "Привет, как дела?"}
    ]
    short, _ = load_targets(f"jsonl:{data}", max_context=1)
    assert [len(t.context) for t in short] == [1, 1, 1, 1]
    a, info = load_targets(data, limit=2, seed=3)
    assert len(a) == 2 and info["targets_available"] == 4 and info["targets"] == 2
    assert [t.id for t in a] == [t.id for t in load_targets(data, limit=2, seed=3)[0]]  # deterministic
    assert [t.id for t in a] == sorted((t.id for t in a), key=[t.id for t in targets].index)  # source order
    seeds = {tuple(t.id for t in load_targets(data, limit=2, seed=s)[0]) for s in range(8)}
    assert len(seeds) > 1


def test_replay_chatbots_rouge_l_parquet_and_cache(tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", DIALOGUES)
    targets, _ = load_targets(data)
    echo = echo_replay(tmp_path / "echo.jsonl", targets)
    other = write_jsonl(tmp_path / "other.jsonl", [{"default": {"text": "banana split"}}])
    args = [
        "chatbot-eval",
        "--model",
        f"replay:{echo}",
        "--model",
        f"replay:{other}",
        "--data",
        str(data),
        "--judge",
        "metric:rougeL",
        "--quiet",
        "--bootstrap",
        "200",
        "--cache",
        str(tmp_path / "c.sqlite"),
    ]
    r = runner.invoke(app, [*args, "-o", str(tmp_path / "run1")])
    assert r.exit_code == 0, r.output
    assert "metric:rougeL" in r.output and "1.000" in r.output and "-100%" in r.output
    res = json.loads((tmp_path / "run1" / "results.json").read_text())
    e = res["results"][f"replay:{echo}"]["metric:rougeL"]["upheld-content"]
    o = res["results"][f"replay:{other}"]["metric:rougeL"]["upheld-content"]
    assert (
        e["mean"] == pytest.approx(1.0)
        and e["ci"] == pytest.approx([1.0, 1.0])
        and e["n"] == 4
        and e["parse_failures"] == 0
    )
    assert o["mean"] == pytest.approx(0.0) and o["n"] == 4
    assert (
        o["vs_first"]["diff"] == pytest.approx(-1.0)
        and o["vs_first"]["relative"] == pytest.approx(-1.0)
        and o["vs_first"]["n"] == 4
    )
    assert res["models"][f"replay:{echo}"]["backend"]["requests"] == 4
    assert res["judges"]["metric:rougeL"]["identity"]["metric"] == "rougeL"
    assert res["schema_version"].startswith("chatbot-eval/") and res["harness"]["version"]
    assert res["environment"]["libraries"]["datasets"] and res["run"]["n_items"] == 4

    from datasets import load_dataset

    ds = load_dataset("parquet", data_files=str(tmp_path / "run1" / "samples.parquet"), split="train")
    assert len(ds) == 8 and {"model", "dialogue_id", "context", "reference", "candidate", "judgments"} <= set(
        ds.column_names
    )
    rows = [x for x in ds if x["model"] == f"replay:{echo}"]
    assert [x["candidate"] for x in rows] == REFERENCES == [x["reference"] for x in rows]
    assert rows[0]["judgments"][0]["judge"] == "metric:rougeL" and rows[0]["judgments"][0][
        "score"
    ] == pytest.approx(1.0)
    assert rows[0]["context"][0] == {"role": "user", "text": "hello , tell me something about yourself !"}

    r = runner.invoke(app, [*args, "-o", str(tmp_path / "run2")])  # rerun: everything from the cache
    assert r.exit_code == 0, r.output
    res2 = json.loads((tmp_path / "run2" / "results.json").read_text())
    for m in res2["models"].values():
        assert m["backend"]["requests"] == 0 and m["generation_cache_hits"] == 4
    assert res2["judges"]["metric:rougeL"]["backend"]["requests"] == 0
    assert res2["results"] == res["results"]

    # the document is typed: it validates, and a malformed one is refused naming the field
    from finetune.chatbot_eval_doc import validate_chatbot_eval

    assert validate_chatbot_eval(res2).run.n_items == 4
    broken = {**res2, "models": {"m": {"identity": {}, "decoding": {}}}}
    with pytest.raises(
        ValueError, match=r"results\.json: not a valid chatbot-eval.*models\.m\.generation_cache_hits"
    ):
        validate_chatbot_eval(broken, where="results.json")


def test_llm_judge_tasks_and_parse_failures_are_counted(tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", DIALOGUES)
    bot = write_jsonl(tmp_path / "bot.jsonl", [{"default": {"text": "i like poetry ."}}])
    # the App. H yes/no judge says Yes; on the Likert prompt it writes something unparseable
    judge = write_jsonl(
        tmp_path / "judge.jsonl",
        [
            {"match": "likert scale of 1 to 5", "response": {"text": "maybe?"}},
            {"default": {"text": "Yes"}},
        ],
    )
    tasks = ["upheld-content", "upheld-content-likert"]
    out = run_chatbot_eval(
        ChatbotEvalConfig(
            models=[f"replay:{bot}"],
            data=str(data),
            judges=[f"replay:{judge}", "metric:rougeL"],
            tasks=tasks,
            output_dir=tmp_path / "o",
            show_progress=False,
            n_bootstrap=0,
            cache_path=tmp_path / "c.sqlite",
        )
    )
    by_judge = out["results"][f"replay:{bot}"]
    assert set(by_judge[f"replay:{judge}"]) == set(tasks)
    assert set(by_judge["metric:rougeL"]) == {"upheld-content"}  # a metric scores once
    assert by_judge[f"replay:{judge}"]["upheld-content"]["mean"] == 1.0
    likert = by_judge[f"replay:{judge}"]["upheld-content-likert"]
    assert likert["mean"] is None and likert["n"] == 0 and likert["parse_failures"] == 4  # never 0
    assert likert["statuses"] == {"parse_error": 4}
    assert out["run"]["ci"] == "95% t-interval" and out["judges"][f"replay:{judge}"]["tasks"].keys() == set(
        tasks
    )
    # the judge saw the context, the withheld human turn and the candidate
    from datasets import load_dataset

    ds = load_dataset("parquet", data_files=str(tmp_path / "o" / "samples.parquet"), split="train")
    assert [j["status"] for j in ds[0]["judgments"]] == ["ok", "parse_error", "ok"]


def test_clear_errors(tmp_path):
    ok = write_jsonl(tmp_path / "d.jsonl", DIALOGUES)
    bot = write_jsonl(tmp_path / "bot.jsonl", [{"default": {"text": "hi"}}])
    users_only = write_jsonl(
        tmp_path / "u.jsonl",
        [
            {
                "id": "x",
                "language": "en",
                "turns": [{"role": "user", "text": "a"}, {"role": "user", "text": "b"}],
            }
        ],
    )
    (tmp_path / "empty.jsonl").write_text("\n")
    cases = [
        (["--data", str(tmp_path / "empty.jsonl")], "holds no dialogue"),
        (["--data", str(users_only)], "no assistant turn"),
        (["--data", str(tmp_path / "missing-dir")], "neither"),
        (["--model", "metric:rougeL"], "not a chatbot backend"),
        (["--model", "nope"], "must look like"),
        (["--judge", "metric:nope"], "unknown reference metric"),
        (["--task", "xdial-eval-dialogue"], "not turn-level"),
    ]
    for extra, message in cases:
        base = {"--model": f"replay:{bot}", "--data": str(ok), "--judge": "metric:rougeL"}
        for k, v in zip(extra[::2], extra[1::2], strict=True):
            base[k] = v
        args = ["chatbot-eval", "-q", "-o", str(tmp_path / "o"), *(x for kv in base.items() for x in kv)]
        r = runner.invoke(app, args)
        assert r.exit_code == 2 and message in r.output, (extra, r.output)


STYLE = "i like to read and write poetry ."
PROMPTS = [
    "hello , tell me something about yourself !",
    "do you have any hobbies or interests ?",
    "Wie geht es dir?",
    "¿Cómo estás?",
    "Привет, как дела?",
    "你好，你今天怎么样？",
    "こんにちは、お元気ですか？",
    "안녕하세요, 잘 지내세요?",
    "नमस्ते, आप कैसे हैं?",
    "مرحبا، كيف حالك؟",
    "Given the following dialogue context",
    "Rating: 1 2 3 4 5",
]


def styled(i: int, n_turns: int) -> list[dict[str, str]]:
    """A dialogue whose assistant always answers in one fixed style (the same sentence)."""
    turns = []
    for k in range(n_turns):
        turns += [
            {"role": "user", "text": PROMPTS[(i + 5 * k) % len(PROMPTS)] + f" {i}"},
            {"role": "assistant", "text": STYLE},
        ]
    return turns


@pytest.fixture
def one_torch_thread():
    """Tiny models run faster on one thread, and do not stall when other processes load the CPU."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_sft_adapter_beats_its_base_model(tmp_path, tiny_llama, one_torch_thread):
    """The UPHELD App. B.1 effect, small: LoRA SFT on dialogues in one style raises ROUGE-L against
    held-out turns of that style over the base model."""
    from finetune.lora import ADAPTER_DIR, LoraSettings
    from finetune.sft import SFTConfig, train_chatbot
    from finetune.trainer import TrainSettings

    train = [styled(i, 1 + i % 2) for i in range(20)]
    cfg = SFTConfig(
        base_model=str(tiny_llama),
        lora=LoraSettings(r=8),
        train=TrainSettings(batch_size=4, max_steps=40, learning_rate=1.5e-2, checkpoint_every=1000),
    )
    meta = train_chatbot(train, cfg, tmp_path / "sft", progress=False)
    assert meta["losses"][-1] < meta["losses"][0]
    held_out = write_jsonl(
        tmp_path / "held.jsonl", [{"id": f"h{i}", "turns": styled(100 + i, 2)} for i in range(4)]
    )
    base, tuned = f"hf:{tiny_llama}", f"hf:{tiny_llama},adapter={tmp_path / 'sft' / ADAPTER_DIR}"
    r = runner.invoke(
        app,
        [
            "chatbot-eval",
            "--model",
            base,
            "--model",
            tuned,
            "--data",
            str(held_out),
            "--judge",
            "metric:rougeL",
            "--max-tokens",
            "12",
            "--limit",
            "4",
            "-q",
            "--bootstrap",
            "200",
            "-o",
            str(tmp_path / "eval"),
        ],
    )
    assert r.exit_code == 0, r.output
    res = json.loads((tmp_path / "eval" / "results.json").read_text())
    b = res["results"][base]["metric:rougeL"]["upheld-content"]
    t = res["results"][tuned]["metric:rougeL"]["upheld-content"]
    print(
        f"ROUGE-L base {b['mean']} (n={b['n']}, fail={b['parse_failures']}) vs adapter {t['mean']} "
        f"(n={t['n']}, fail={t['parse_failures']}); paired {t['vs_first']}"
    )
    assert res["run"]["n_items"] == 4 and t["n"] == 4
    assert t["mean"] > (b["mean"] or 0.0) + 0.25 and t["vs_first"]["diff"] > 0.25
    assert res["models"][tuned]["identity"]["adapter_sha256"]


@pytest.mark.shared_data
def test_upheld_held_out_turns_with_replay_and_metrics(tmp_path, shared_data):
    src = shared_data / "upheld"
    if not (src / "main").is_dir():
        pytest.skip(f"UPHELD data not found at {src}")
    from harness.data.resolve import prepare_dataset

    handle = prepare_dataset("upheld", source=src, show_progress=False)
    data = f"{handle.location}:main"
    with pytest.raises(ValueError, match="name the config"):  # main and llm_arena: say which
        load_targets(handle.location)
    targets, info = load_targets(data, limit=10, seed=0)
    assert len(targets) == 10 and info["kind"] == "turn-items" and info["targets_available"] > 300
    assert info["skipped"]["same_item"] > 0 and info["skipped"]["user_turn"] > 0  # withheld user turns
    echo = echo_replay(tmp_path / "echo.jsonl", targets)
    fixed = write_jsonl(tmp_path / "fixed.jsonl", [{"default": {"text": "Thanks, I will get back to you."}}])
    out = run_chatbot_eval(
        ChatbotEvalConfig(
            models=[f"replay:{fixed}", f"replay:{echo}"],
            data=data,
            judges=["metric:rougeL", "metric:rouge1"],
            limit=10,
            max_context=4,
            output_dir=tmp_path / "o",
            show_progress=False,
            n_bootstrap=200,
        )
    )
    f = out["results"][f"replay:{fixed}"]["metric:rougeL"]["upheld-content"]
    e = out["results"][f"replay:{echo}"]["metric:rougeL"]["upheld-content"]
    assert f["n"] == e["n"] == 10 and 0.0 <= f["mean"] < 0.5 and e["mean"] > 0.9
    assert e["vs_first"]["diff"] > 0 and out["data"]["config"] == "main"
    from datasets import load_dataset

    ds = load_dataset("parquet", data_files=str(tmp_path / "o" / "samples.parquet"), split="train")
    assert len(ds) == 20 and all(len(x["context"]) <= 4 for x in ds)
