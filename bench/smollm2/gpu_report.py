"""The GPU run of the SmolLM2 paths (bench/smollm2/gpu.sh) as a docs table, next to the CPU's numbers.

    .venv/bin/python bench/smollm2/gpu_report.py --from DIR [--extra DIR] --cpu-subset RUN [--write-docs]
    .venv/bin/python bench/smollm2/gpu_report.py --docs-only

``--from DIR`` is the ``--out`` folder of ``bash bench/smollm2/gpu.sh`` (each part's log and time, the
``harness run`` folders of the xDial-Eval P(Yes) runs, the JSON of bench/smollm2/lora.py, judge.py and
medal.py as they ran there, the adapters' metadata). ``--extra DIR`` optionally holds ``harness run``
folders made afterwards on the same GPU machine: ``zs-turn60`` / ``ft-turn60`` (zero-shot and
LoRA-tuned P(Yes) on ``--limit 60`` of the turn-level sets) and ``ft-dial`` (the LoRA-tuned evaluator on
the full dialogue-level sets). ``RUN`` is a ``harness run`` of the CPU's subset on the CPU machine
(``--judge hf:smollm2-135m-instruct,dtype=float32 --task xdial-eval --limit 20``: served by the request
cache of bench/smollm2/judge.py's run, i.e. the CPU's own scores); the report compares the two devices
item by item on it.

Writes bench/results/smollm2_gpu.json (the docs block ``smollm2_gpu`` of docs/smollm2.md).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "smollm2_gpu.json"
CPU_JUDGE = ROOT / "bench" / "results" / "smollm2_judge.json"
LANGS = ("en", "zh", "es", "de", "fr", "ja", "ko", "hi", "ar", "ru")
TASKS = {"xdial-eval-turn": "turn", "xdial-eval-dialogue": "dialogue"}


class Collected:
    """The files of a gpu.sh ``--out`` folder (names ``llm/<path>``) and of the optional folder of
    further runs (names ``extra/<path>``)."""

    def __init__(self, out: Path, extra: Path | None = None) -> None:
        self.roots = {"llm": out, **({"extra": extra} if extra is not None else {})}

    def path(self, name: str) -> Path | None:
        prefix, _, rest = name.partition("/")
        root = self.roots.get(prefix)
        return root / rest if root is not None and (root / rest).is_file() else None

    def json(self, name: str) -> Any:
        p = self.path(name)
        return json.loads(p.read_text("utf-8")) if p is not None else None

    def text(self, name: str) -> str:
        p = self.path(name)
        return p.read_text("utf-8", "replace") if p is not None else ""

    def parquet(self, name: str) -> Any:
        import pandas as pd

        p = self.path(name)
        if p is None:
            raise FileNotFoundError(name)
        return pd.read_parquet(p)


def _run(doc: dict[str, Any] | None) -> dict[str, Any] | None:
    """Per task and language: Pearson / Spearman value, CI and n; parse failures; items/s; spec."""
    if doc is None:
        return None
    out: dict[str, Any] = {
        "spec": doc["judge"]["spec"],
        "limit": doc["run"]["limit"],
        "n_items": doc["run"]["n_items"],
        # a run served (partly) by the request cache has no throughput to report
        "items_per_s": round(doc["timings"]["items_per_s_scoring"], 1) if not doc["cache"]["hits"] else None,
        "cache_hits": doc["cache"]["hits"],
        "scoring_s": round(doc["timings"]["scoring_s"], 1),
        "prompt_tokens": doc["usage"]["prompt_tokens"],
        "tasks": {},
    }
    for task, per in doc["results"].items():
        out["tasks"][task] = {
            "parse_failures": doc["parse_failures"].get(task),
            "languages": {
                lang: {
                    m: {k: per[lang][m].get(k) for k in ("value", "ci", "n")} for m in ("pearson", "spearman")
                }
                for lang in (*LANGS, "all")
                if lang in per
            },
        }
    return out


def _device_agreement(t: Collected, cpu_run: Path | None) -> dict[str, Any] | None:
    if cpu_run is None or t.path("llm/xdial-limit20/samples.parquet") is None:
        return None
    import pandas as pd

    gpu = t.parquet("llm/xdial-limit20/samples.parquet")
    cpu = pd.read_parquet(cpu_run / "samples.parquet")
    m = gpu.merge(cpu, on=["task", "dataset", "language", "item_id"], suffixes=("_gpu", "_cpu"))
    d = (m["score_gpu"] - m["score_cpu"]).abs()
    return {
        "items": len(m),
        "gpu_items": len(gpu),
        "cpu_items": len(cpu),
        "same_prompt": int((m["prompt_hash_gpu"] == m["prompt_hash_cpu"]).sum()),
        "max_abs_diff": float(d.max()),
        "mean_abs_diff": float(d.mean()),
        "cpu_run": "harness run --judge hf:smollm2-135m-instruct,dtype=float32 --task xdial-eval --limit 20 "
        "(the CPU machine, from the request cache of the CPU run in bench/results/smollm2_judge.json)",
    }


def _parts(text: str) -> dict[str, dict[str, int]]:
    return {
        m.group(1): {"rc": int(m.group(2)), "seconds": int(m.group(3))}
        for m in re.finditer(r"^(\w+) rc=(\d+) (\d+)s$", text, re.M)
    }


def collect(src: Path, cpu_run: Path | None, extra: Path | None = None) -> dict[str, Any]:
    t = Collected(src, extra)
    dial = t.json("llm/xdial-dialogue/results.json")
    if dial is None:
        raise SystemExit(
            f"{src}: no xdial-dialogue/results.json (not the --out folder of bench/smollm2/gpu.sh)"
        )
    env = dial["environment"]
    ev = t.json("llm/results/evaluator_dialeval_adapter.json") or {}
    judge = t.json("llm/results/smollm2_judge.json") or {}
    chat = (t.json("llm/results/smollm2_lora_chatbot.json") or {}).get("chatbot")
    pipe = ((t.json("llm/results/smollm2_medal.json") or {}).get("runs") or {}).get("medal-smollm2-logprob")
    tr = ev.get("train_result") or {}
    return {
        "date": dial["run"]["created_at"][:10],
        "device": ", ".join(env["device"].get("cuda_devices") or []) or "none",
        "libraries": {k: v for k, v in env["libraries"].items() if v},
        "parts": _parts(t.text("llm/parts.txt")),
        "xdial": {
            "zero-shot, dialogue (full)": _run(dial),
            "zero-shot, turn (--limit 60)": _run(t.json("extra/zs-turn60/results.json")),
            "LoRA-tuned, dialogue (full)": _run(t.json("extra/ft-dial/results.json")),
            "LoRA-tuned, turn (--limit 60)": _run(t.json("extra/ft-turn60/results.json")),
            "zero-shot, CPU subset (--limit 20)": _run(t.json("llm/xdial-limit20/results.json")),
        },
        "device_agreement": _device_agreement(t, cpu_run),
        "evaluator": ev
        and {
            "examples": (ev.get("training_data") or {}).get("examples"),
            "kinds": (ev.get("training_data") or {}).get("kinds"),
            "steps": tr.get("steps"),
            "batch_size": (ev.get("hyperparameters") or {}).get("batch_size"),
            "train_seconds": tr.get("train_seconds"),
            "samples_per_second": tr.get("samples_per_second"),
            "mixed_precision": tr.get("mixed_precision"),
            "first_loss": tr.get("first_loss"),
            "last_loss": tr.get("last_loss"),
            "held_out": {k: (ev.get("eval") or {}).get(k) for k in ("n", "accuracy", "auc")},
            "adapter_sha256": ev.get("adapter_sha256"),
        },
        "chatbot": chat
        and {
            k: chat.get(k)
            for k in ("steps", "batch_size", "max_length", "train_dialogues", "train_seconds", "eval_limit")
        }
        | {
            "losses_first_last": chat.get("losses_first_last"),
            "rougeL": _rouge(chat.get("chatbot_eval") or {}),
        },
        "medal_verdicts": judge.get("medal")
        and {k: judge["medal"][k] for k in ("n_per_set", "dialogues_per_language", "max_tokens", "seconds")}
        | {
            "per_language": {
                lang: {k: v[k] for k in ("n", "parse_failures", "finish_reasons")}
                for lang, v in judge["medal"]["per_language"].items()
            }
        },
        "pairwise": judge.get("pairwise")
        and {k: judge["pairwise"][k] for k in ("n_pairs", "answers", "label_probs", "seconds")}
        | {
            k: judge["pairwise"]["results"]["all"][k]
            for k in ("parse_failures", "first_position_rate", "flip_rate", "binomtest_p")
        },
        "pipeline": pipe
        and {
            "wall_seconds": pipe["wall_seconds"],
            "languages": pipe["languages"],
            "n_scenes": pipe["n_scenes"],
            "per_language": pipe["per_language"],
            "judge_p_yes": pipe["judge_p_yes"],
            "first_turn_languages": pipe["first_turn_languages"],
        },
    }


def _rouge(ev: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for model, per_judge in ev.items():
        for e in (per_judge.get("metric:rougeL") or {}).values():
            out["SFT" if "adapter=" in model else "base"] = {k: e.get(k) for k in ("mean", "ci", "n")} | (
                {"diff": e["vs_first"]["diff"], "diff_ci": e["vs_first"]["ci"]} if e.get("vs_first") else {}
            )
    return out


def _f(x: Any, spec: str = ".3f") -> str:
    return "—" if x is None else format(x, spec)


def _ci(ci: Any) -> str:
    return "—" if not ci or None in ci else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def _cpu_subset() -> dict[str, Any] | None:
    x = json.loads(CPU_JUDGE.read_text("utf-8")).get("xdial") if CPU_JUDGE.is_file() else None
    return x and {
        "tasks": {task: {"languages": per} for task, per in x["tasks"].items()},
        "limit": x["limit"],
    }


def markdown(r: dict[str, Any]) -> str:
    lines = [
        f"**On {'one ' + r['device'] if r['device'] != 'none' else 'a machine without CUDA (SMOKE=1)'}** "
        f"({r['date']}, `bash bench/smollm2/gpu.sh --source DIR --out DIR`; "
        f"torch {r['libraries'].get('torch')}, transformers "
        f"{r['libraries'].get('transformers')}, peft {r['libraries'].get('peft')}). The parts ran at once; "
        "each had a time limit (seconds; rc 124 = stopped at its limit). The P(Yes) runs are float32 "
        "(`dtype=float32`, to compare with the CPU); the other parts use the hf backend's default on CUDA, bf16:",
        "",
        "| part | rc | seconds |",
        "|---|---:|---:|",
        *(f"| {k} | {v['rc']} | {v['seconds']} |" for k, v in r["parts"].items()),
        "",
        "xDial-Eval P(Yes), Pearson per language (mean over the sets of each language; `all`: the mean over "
        "the languages):",
        "",
        "| judge, level (items) | " + " | ".join(LANGS) + " | all | parse failures | items/s |",
        "|---|" + "---:|" * (len(LANGS) + 3),
    ]
    rows = dict(r["xdial"])
    cpu = _cpu_subset()
    for name, run in rows.items():
        if not run:
            continue
        for task, t in run["tasks"].items():
            langs = t["languages"]
            cells = [_f((langs.get(lang) or {}).get("pearson", {}).get("value")) for lang in (*LANGS, "all")]
            label = name if len(run["tasks"]) == 1 else f"{name}, {TASKS[task]}"
            lines.append(
                f"| GPU {label} ({sum((langs.get(lang) or {}).get('pearson', {}).get('n') or 0 for lang in LANGS)}) | "
                + " | ".join(cells)
                + f" | {t['parse_failures']} | {_f(run['items_per_s'], '.1f') if run['items_per_s'] else 'cache'} |"
            )
            if name.startswith("zero-shot, CPU subset") and cpu and task in cpu["tasks"]:
                cl = cpu["tasks"][task]["languages"]
                cc = [_f((cl.get(lang) or {}).get("pearson", {}).get("value")) for lang in (*LANGS, "all")]
                lines.append(f"| CPU the same subset, {TASKS[task]} | " + " | ".join(cc) + " | — | — |")
    stopped = [k for k, v in r["parts"].items() if v["rc"] == 124]
    if stopped:
        lines += [
            "",
            f"Stopped at their limits: {', '.join(f'`{k}`' for k in stopped)} — the zero-shot run of the full "
            "turn-level sets and the tuned evaluator's full scoring did not fit; the `--limit 60` turn rows and "
            "the tuned dialogue row were scored afterwards on the same machine (`cache`: their first pass filled "
            "the request cache, the rows come from a rerun).",
        ]
    a = r.get("device_agreement")
    if a:
        lines += [
            "",
            f"GPU vs CPU on the same {a['items']} items (float32 on both; the CPU's scores from the request "
            f"cache): max |Δ P(Yes)| = {a['max_abs_diff']:.1e}, mean {a['mean_abs_diff']:.1e}; identical "
            f"prompts on {a['same_prompt']} of {a['items']}.",
        ]
    e = r.get("evaluator")
    if e:
        lines += [
            "",
            f"**LoRA P(Yes) evaluator** (the `evaluator` part): {e['examples']:,} self-supervised Table 3 examples "
            f"from Topical-Chat ({', '.join(f'{v:,} {k}' for k, v in e['kinds'].items())} planned), {e['steps']} steps × {e['batch_size']}, {e['mixed_precision']}, "
            f"{e['train_seconds']:.0f} s of training ({e['samples_per_second']:.0f} examples/s); loss "
            f"{e['first_loss']:.2f} → {e['last_loss']:.2f}; held-out pairs (n={e['held_out']['n']}): accuracy "
            f"{_f(e['held_out']['accuracy'])}, AUC {_f(e['held_out']['auc'])}. Its xDial-Eval rows are above.",
        ]
    c = r.get("chatbot")
    if c:
        rl = c["rougeL"]
        lines += [
            "",
            f"**Chatbot SFT** (the `chatbot` part): {c['train_dialogues']:,} CCC conversations, {c['steps']} steps × "
            f"{c['batch_size']} (max length {c['max_length']}), {c['train_seconds']:.0f} s; `harness chatbot-eval` "
            f"on {c['eval_limit']} held-back CCC human turns, ROUGE-L: base {_f(rl['base']['mean'])} "
            f"{_ci(rl['base']['ci'])}, SFT {_f(rl['SFT']['mean'])} {_ci(rl['SFT']['ci'])}, Δ "
            f"{rl['SFT']['diff']:+.3f} {_ci(rl['SFT']['diff_ci'])}.",
        ]
    m = r.get("medal_verdicts")
    if m:
        pl = m["per_language"]
        n, pf = sum(v["n"] for v in pl.values()), sum(v["parse_failures"] for v in pl.values())
        stops: dict[str, int] = {}
        for v in pl.values():
            for k, x in v["finish_reasons"].items():
                stops[k] = stops.get(k, 0) + x
        lines += [
            "",
            f"**MEDAL JSON verdicts** (unguided, {m['max_tokens']} tokens): {pf} of {n} unparseable "
            f"({m['dialogues_per_language']} dialogues × 10 languages; "
            + ", ".join(f"{k}: {x}" for k, x in sorted(stops.items()))
            + f" finish reasons), {m['seconds']:.0f} s.",
        ]
    p = r.get("pairwise")
    if p:
        lines += [
            "",
            f"**Pairwise position bias**: {p['n_pairs']} dialogue pairs × both orders, labels A/B/Tie by "
            f"log-prob: answers {p['answers']}, parse failures {p['parse_failures']}, first-position rate "
            f"{p['first_position_rate']:.2f}, flip rate {p['flip_rate']:.2f}, binomial p = {p['binomtest_p']:.1e}; "
            f"mean P(A) {p['label_probs']['A']['mean']:.2f}, {p['seconds']:.0f} s.",
        ]
    q = r.get("pipeline")
    if q:
        ft = q["first_turn_languages"]
        lines += [
            "",
            f"**MEDAL pipeline** (`smollm2-logprob.yaml`, {', '.join(q['languages'])} × {q['n_scenes']} scenes, "
            f"{q['wall_seconds']:.0f} s): user-judge P(Yes) over {q['judge_p_yes']['n']} first-turn verdicts "
            f"mean {q['judge_p_yes']['mean']:.2f}, max {q['judge_p_yes']['max']:.2f}, "
            f"{q['judge_p_yes']['accepted']} accepted, so "
            f"{sum(v['with_turns'] for v in q['per_language'].values())} dialogues started; first turns "
            "identified as: " + "; ".join(f"{lang} {v['identified']}" for lang, v in ft.items()) + ".",
        ]
    return "\n".join(lines)


def main() -> int:
    from bench.docs_tables import write_blocks

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--from", dest="src", type=Path, help="the --out folder of bench/smollm2/gpu.sh")
    ap.add_argument("--extra", type=Path, help="harness run folders made afterwards on the GPU machine")
    ap.add_argument("--cpu-subset", type=Path, help="harness run folder of the CPU's --limit 20 subset")
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument("--docs-only", action="store_true", help="render the committed JSON")
    ap.add_argument(
        "--results", type=Path, help="write the JSON here instead (a trial run; not with --write-docs)"
    )
    args = ap.parse_args()
    if args.results is not None and (args.write_docs or args.docs_only):
        ap.error("--write-docs / --docs-only render the committed JSON: leave out --results")
    path = args.results or RESULTS
    if not args.docs_only:
        if args.src is None:
            ap.error("--from DIR (or --docs-only)")
        res = collect(args.src, args.cpu_subset, args.extra)
        path.write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    res = json.loads(path.read_text("utf-8"))
    print(markdown(res))
    if args.write_docs or args.docs_only:
        write_blocks("bench.smollm2.gpu_report", res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
