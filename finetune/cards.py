"""Model cards (Hugging Face format: YAML front matter + Markdown body) for trained evaluators and
chatbots, generated from the adapter's metadata file and harness ``results.json`` files.

The metadata file written next to every adapter (``dialeval_evaluator.json`` for discriminative
evaluators, ``dialeval_adapter.json`` for generative evaluators and chatbots) holds the base model
id + revision, the adapter / LoRA configuration, the training data version (dataset name, version,
fingerprint, sizes, languages), the hyper-parameters and the training result. Evaluation results
come from ``harness run`` results (task → language → metric → {value, ci, n}), one table row per
task × language.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from dataset_builders.xdial_eval import XDIAL_CITATION

METADATA_FILES = ("dialeval_evaluator.json", "dialeval_adapter.json")
HEADLINE_METRICS = ("spearman", "pearson", "kendall", "accuracy", "f1_pos", "auc")

KIND_TEXT = {
    "discriminative-evaluator": (
        "a discriminative dialogue evaluator: a sentence encoder with a LoRA adapter and a small scoring head "
        "that maps a (context, response) pair or a whole dialogue to a quality score in [0, 1] "
        "(PoE / FineD-Eval style, xDial-Eval App. C.1)"
    ),
    "generative-evaluator": (
        "a generative dialogue evaluator: a causal language model with a LoRA adapter, instruction-tuned to "
        "answer Yes/No about a response or dialogue; its score is P(Yes) / (P(Yes) + P(No)) (xDial-Eval §4)"
    ),
    "crosslingual-evaluator": (
        "a multilingual dialogue evaluator by cross-lingual distillation: a linear map (ridge regression) from the "
        "multilingual E5 embedding space into the packaged English MiniLM's, fitted on parallel utterances of "
        "self-supervised training pairs in 10 languages, so that the cosine of the mapped context and response "
        "behaves like MiniLM on the English translation; a logistic calibration per level gives a score in (0, 1). "
        "One map per left-out benchmark set (leave-one-set-out) plus one on everything"
    ),
    "chatbot": (
        "an open-domain chatbot: a causal language model with a LoRA adapter, fine-tuned on dialogues with the "
        "loss on assistant turns only"
    ),
}
JUDGE_SPEC = {
    "discriminative-evaluator": "evaluator:{path}",
    "crosslingual-evaluator": "evaluator:{path}",
    "generative-evaluator": "hf:{base},adapter={path}",
    "chatbot": "hf:{base},adapter={path}",
}


def load_metadata(model_dir: str | Path) -> dict[str, Any]:
    root = Path(model_dir)
    for name in METADATA_FILES:
        if (root / name).is_file():
            return _normalise(json.loads((root / name).read_text("utf-8")), name)
    raise FileNotFoundError(
        f"{root}: no {' or '.join(METADATA_FILES)} (is this a directory written by finetune/?)"
    )


def _normalise(meta: dict[str, Any], file: str) -> dict[str, Any]:
    """The discriminative evaluator's metadata (``dialeval_evaluator.json``: ``data_version``,
    ``config``, ``sha256``) in the card's vocabulary (``training_data``, ``hyperparameters`` ...)."""
    out = dict(meta)
    if file == "dialeval_evaluator.json":
        out.setdefault("kind", "discriminative-evaluator")
        cfg = meta.get("config") or {}
        out.setdefault("training_data", meta.get("data_version") or {})
        out.setdefault("adapter", {f"lora_{k}": v for k, v in (cfg.get("lora") or {}).items()})
        hp = {k: v for k, v in cfg.items() if k not in ("lora", "train", "base_model", "revision")}
        out.setdefault("hyperparameters", {**hp, **(cfg.get("train") or {})})
        out.setdefault("adapter_sha256", meta.get("sha256"))
        out.setdefault("base_revision", meta.get("revision"))
        if meta.get("eval"):
            out.setdefault(
                "train_result",
                {
                    **(meta.get("train_result") or {}),
                    **{
                        f"held_out_{k}": v for k, v in meta["eval"].items() if not isinstance(v, (dict, list))
                    },
                },
            )
    return out


def results_rows(results: Iterable[str | Path | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per results file × task × language with the headline metrics found there."""
    rows = []
    for res in results:
        data = json.loads(Path(res).read_text("utf-8")) if not isinstance(res, Mapping) else res
        run_id = data.get("run", {}).get("id", "")
        datasets = data.get("datasets", {})
        for task, per_lang in (data.get("results") or {}).items():
            ds = datasets.get(task, {})
            for lang, metrics in per_lang.items():
                if lang == "all" and len(per_lang) == 2:  # one language: "all" repeats it
                    continue
                row = {
                    "task": task,
                    "language": lang,
                    "run": run_id,
                    "dataset": ds.get("builder") or ds.get("location"),
                    "fingerprint": (ds.get("fingerprint") or "")[:12],
                }
                for m in HEADLINE_METRICS:
                    if isinstance(metrics.get(m), Mapping) and metrics[m].get("value") is not None:
                        row[m] = metrics[m]["value"]
                        row[f"{m}_ci"] = metrics[m].get("ci")
                        row["n"] = metrics[m].get("n")
                        for sub, val in (metrics[m].get("per_dataset") or {}).items():
                            row.setdefault("per_dataset", {}).setdefault(sub, {"n": val.get("n")})[m] = (
                                val.get("value")
                            )
                rows.append(row)
    return rows


def render_card(
    model_dir: str | Path,
    *,
    name: str,
    results: Iterable[str | Path | Mapping[str, Any]] = (),
    license: str | None = None,
    intended_use: str | None = None,
    limitations: Iterable[str] = (),
    citation: str | None = None,
) -> str:
    """The model card of the model in ``model_dir`` as Markdown with YAML front matter."""
    meta = load_metadata(model_dir)
    kind = meta.get("kind", "discriminative-evaluator")
    base = meta.get("base_model", "unknown")
    if kind == "crosslingual-evaluator":  # the multilingual encoder it runs on; MiniLM is the teacher
        base = (meta.get("student") or {}).get("model") or base
    data = meta.get("training_data") or {}
    rows = results_rows(results)
    langs = sorted({r["language"] for r in rows if r["language"] != "all"} | set(data.get("languages") or []))
    lic = license or meta.get("license") or "apache-2.0"
    front: dict[str, Any] = {
        "library_name": "safetensors" if kind == "crosslingual-evaluator" else "peft",
        "base_model": base if not str(base).startswith("/") else None,
        "license": lic,
        "language": langs or None,
        "tags": [
            "dialeval-harness",
            "dialogue-evaluation" if "evaluator" in kind else "chatbot",
            *([] if kind == "crosslingual-evaluator" else ["lora"]),
            kind,
        ],
        "datasets": [data["name"]] if data.get("name") else None,
    }
    if rows:
        front["model-index"] = [
            {
                "name": name,
                "results": [
                    {
                        "task": {"type": "dialogue-evaluation", "name": r["task"]},
                        "dataset": {"name": str(r["dataset"]), "type": r["task"], "config": r["language"]},
                        "metrics": [
                            {"type": m, "value": round(float(r[m]), 4)} for m in HEADLINE_METRICS if m in r
                        ],
                    }
                    for r in rows
                    if any(m in r for m in HEADLINE_METRICS)
                ],
            }
        ]
    front = {k: v for k, v in front.items() if v is not None}
    spec = JUDGE_SPEC.get(kind, "hf:{base},adapter={path}").format(path=f"<path to {name}>", base=base)
    hp = meta.get("hyperparameters") or {}
    out = [
        "---",
        yaml.safe_dump(front, sort_keys=False, allow_unicode=True).rstrip(),
        "---",
        "",
        f"# {name}",
        "",
    ]
    out += [
        f"{name} is {KIND_TEXT.get(kind, kind)}. It was trained with the `finetune/` package of dialeval-harness.",
        "",
    ]
    out += ["## Use", "", "```bash", f"harness run --judge {spec} --task <task> --source <data>", "```", ""]
    if kind == "crosslingual-evaluator":
        out += _crosslingual_section(meta)
    else:
        out += [
            "## Base model and adapter",
            "",
            "| | |",
            "|---|---|",
            f"| base model | `{base}` |",
            f"| base revision | `{meta.get('base_revision') or 'unpinned'}` |",
        ]
        made = meta.get("base_model_materialized") or {}
        if made:
            src = made.get("source") or {}
            how = ", ".join(f"{k} `{v}`" for k, v in src.items()) if isinstance(src, dict) else f"`{src}`"
            out.append(
                f"| base model made by | `harness models materialize {base}` ({made.get('model') or base}, "
                f"materializer {made.get('materializer_version')}) from {how} |"
            )
        if meta.get("frozen_layers"):
            out.append(
                f"| frozen | embeddings + the lowest {meta['frozen_layers']} layers (LoRA on the layers above; "
                f"{meta.get('cached_sequences', 0):,} training sequences' frozen outputs cached once) |"
            )
        if meta.get("timings"):
            t = meta["timings"]
            prep = "preparation + frozen-layer cache" if meta.get("cached_sequences") else "preparation"
            out.append(
                f"| cold training time | {(t.get('prepare_s', 0) + t.get('train_s', 0)) / 60:.1f} min "
                f"({prep} {t.get('prepare_s', 0) / 60:.1f} min, training loop "
                f"{t.get('train_s', 0) / 60:.1f} min) |"
            )
        if meta.get("versions"):
            libs = ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
            device = "CUDA GPU" if "+cu" in str(meta["versions"].get("torch", "")) else "CPU"
            out.append(f"| trained with | {libs} ({device}) |")
    for k, v in (meta.get("adapter") or {}).items():
        out.append(f"| adapter `{k}` | `{v}` |")
    if meta.get("adapter_sha256") and kind != "crosslingual-evaluator":
        out.append(f"| adapter sha256 | `{meta['adapter_sha256']}` |")
    out.append("")
    out += ["## Training data", "", "| | |", "|---|---|"]
    for k in (
        "name",
        "version",
        "fingerprint",
        "source",
        "examples",
        "positives",
        "negatives",
        "languages",
        "kinds",
    ):
        if data.get(k) not in (None, "", [], {}):
            out.append(f"| {k} | {_fmt(data[k])} |")
    out.append("")
    out += ["## Training", "", "| hyper-parameter | value |", "|---|---|"]
    out += [f"| {k} | `{_fmt(v)}` |" for k, v in hp.items()]
    tr = meta.get("train_result") or {}
    if tr:
        out += [
            "",
            "| training result | value |",
            "|---|---|",
            *(f"| {k} | {_fmt(v)} |" for k, v in tr.items()),
        ]
    out.append("")
    out += ["## Evaluation", ""]
    if rows:
        cols = [m for m in HEADLINE_METRICS if any(m in r for r in rows)]
        has_ci = any(r.get(m + "_ci") for r in rows for m in cols)
        out += [
            "Correlation with human judgements from `harness run`"
            + (" (95% bootstrap CI):" if has_ci else ":"),
            "",
            "| task | language | n | " + " | ".join(cols) + " |",
            "|---|---|---:|" + "---:|" * len(cols),
        ]
        for r in rows:
            cells = [
                f"{r[m]:.3f} [{r[m + '_ci'][0]:.2f}, {r[m + '_ci'][1]:.2f}]"
                if m in r and r.get(m + "_ci")
                else (f"{r[m]:.3f}" if m in r else "—")
                for m in cols
            ]
            out.append(f"| {r['task']} | {r['language']} | {r.get('n', '')} | " + " | ".join(cells) + " |")
        out.append("")
        subs = [(r, k, v) for r in rows for k, v in sorted((r.get("per_dataset") or {}).items())]
        if subs:
            out += [
                "Per dataset:",
                "",
                "| task | language | dataset | n | " + " | ".join(cols) + " |",
                "|---|---|---|---:|" + "---:|" * len(cols),
            ]
            for r, k, v in subs:
                cells = [f"{v[m]:.3f}" if v.get(m) is not None else "—" for m in cols]
                out.append(
                    f"| {r['task']} | {r['language']} | {k} | {v.get('n', '')} | " + " | ".join(cells) + " |"
                )
            out.append("")
    else:
        out += ["No evaluation results were attached when this card was generated.", ""]
    out += ["## Intended use", "", intended_use or _default_use(kind), ""]
    lims = list(limitations) or _default_limits(kind, langs)
    out += ["## Limitations", "", *(f"- {x}" for x in lims), ""]
    out += [
        "## License",
        "",
        f"`{lic}`. The adapter inherits the terms of its base model and of its training data "
        f"({_fmt(data.get('license') or 'see the training data card')}).",
        "",
    ]
    out += ["## Citation", "", "```bibtex", (citation or XDIAL_CITATION).strip(), "```", ""]
    return "\n".join(out)


def _crosslingual_section(meta: Mapping[str, Any]) -> list[str]:
    st, te = meta.get("student") or {}, meta.get("teacher") or {}
    out = [
        "## Encoders and maps",
        "",
        "| | |",
        "|---|---|",
        f"| student (runs at scoring time) | `{st.get('model')}` on `{st.get('engine')}`, {st.get('quantisation', 'full precision')} |",
        f"| student weights sha256 | `{st.get('weights_sha256')}` |",
        f"| teacher (English, training only) | `{te.get('model')}` |",
        f"| maps sha256 (`maps.safetensors`) | `{meta.get('sha256')}` |",
        "",
        "One map per fold: `all`, and one per left-out set trained without any text of that set.",
        "",
        "| fold | utterance pairs | left out | turn-pair AUC | dialogue-pair AUC |",
        "|---|---:|---:|---:|---:|",
    ]
    for fold, f in (meta.get("folds") or {}).items():
        cal = f.get("calibration") or {}
        auc = [f"{cal[lvl]['auc']:.3f}" if lvl in cal else "—" for lvl in ("turn", "dialogue")]
        out.append(f"| {fold} | {f.get('pairs')} | {f.get('excluded_pairs')} | {auc[0]} | {auc[1]} |")
    return [*out, ""]


def write_card(model_dir: str | Path, out_path: str | Path, **kwargs: Any) -> Path:
    path = Path(out_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_card(model_dir, **kwargs), "utf-8")
    return path


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return ", ".join(str(x) for x in v)
    if isinstance(v, dict):
        return ", ".join(f"{k}: {_fmt(x)}" for k, x in v.items())
    return str(v)


def _default_use(kind: str) -> str:
    if kind == "chatbot":
        return "Research on open-domain chatbots and their evaluation; evaluate it with the harness like any chatbot."
    return (
        "Automatic evaluation of open-domain dialogue responses / dialogues for research, as one judge among "
        "others; check its agreement with human judgements on your data (`harness run`) before relying on it."
    )


def _default_limits(kind: str, langs: list[str]) -> list[str]:
    out = [
        "Trained on synthetic (self-supervised or distilled) labels: it learns what the training negatives "
        "teach (incoherent order, unrelated responses), not every aspect of quality.",
        f"Evaluated languages: {', '.join(langs) if langs else 'none reported'}; others are untested.",
        "Scores are comparable within one model, not across evaluators.",
    ]
    if kind == "chatbot":
        out = ["A small LoRA fine-tune; it can be unsafe, wrong or repetitive like its base model."]
    if kind == "crosslingual-evaluator":
        out = [
            "It inherits what the English MiniLM cosine measures (topical relatedness of the last context "
            "utterance and the response), not every aspect of quality; no human rating was used in training.",
            "Trained on the contexts of the xDial-Eval sets: an item of one of those sets is scored by the map that "
            "never saw that set's text (the `fold` field of each sample); other data is scored by the map trained "
            "on all of them.",
            f"Languages: {', '.join(langs) if langs else 'none reported'}; others are untested.",
            "Scores are comparable within one model, not across evaluators.",
        ]
    return out
