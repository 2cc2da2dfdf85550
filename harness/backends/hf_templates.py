"""Helpers of the ``hf`` backend: built-in chat templates, template resolution, cheap fingerprints,
device and dtype resolution.

Built-in templates are Jinja strings rendered by ``tokenizer.apply_chat_template`` exactly like a
model's own template, so one code path renders every prompt and one sha identifies it.

* ``alpaca`` — the Alpaca format used by xDial-Eval for its fine-tuned evaluators: system messages
  (if any) first, then the Alpaca preamble, the conversation contents and ``### Response:``.
* ``plain`` — the messages' contents joined by blank lines, then a newline.

:func:`resolve_weights` says what ``from_pretrained`` loads for a spec's target (a packaged model's
short name, a GGUF file, a directory or a Hub id) and which weight hashes identify it; the ``hf`` and
``vllm`` backends share it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.jsontypes import JSONObject

if TYPE_CHECKING:
    import torch

ALPACA_PREAMBLE = (
    "Below is an instruction that describes a task, paired with an input that provides further context. "
    "Write a response that appropriately completes the request.\n\n"
)

# Newlines are written as Jinja string literals: transformers renders with trim_blocks/lstrip_blocks,
# which would eat literal newlines that follow block tags.
ALPACA_TEMPLATE = (
    "{%- for m in messages if m['role'] == 'system' -%}{{ m['content'] ~ '\\n\\n' }}{%- endfor -%}"
    "{{ '" + ALPACA_PREAMBLE.replace("\n", "\\n") + "' }}"
    "{%- for m in messages if m['role'] != 'system' -%}"
    "{%- if not loop.first %}{{ '\\n\\n' }}{% endif -%}{{ m['content'] }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt %}{{ '\\n\\n### Response:\\n' }}{% endif -%}"
)

PLAIN_TEMPLATE = (
    "{%- for m in messages -%}{%- if not loop.first %}{{ '\\n\\n' }}{% endif -%}{{ m['content'] }}{%- endfor -%}"
    "{{ '\\n' }}"
)

BUILTIN_TEMPLATES: dict[str, str] = {"alpaca": ALPACA_TEMPLATE, "plain": PLAIN_TEMPLATE}

# Files whose names and sizes fingerprint a local model directory (their bytes are not hashed).
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".msgpack", ".h5")
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "spiece.model",
)
# Small files whose bytes are hashed.
_HASHED_FILES = ("config.json", "generation_config.json")


class ChatTemplateError(ValueError):
    """No usable chat template for a model."""


@dataclass(frozen=True)
class WeightsSource:
    """What ``from_pretrained`` loads (``path``, plus ``gguf_file=`` for a GGUF file in it) and the
    entries that identify the weights in a backend identity (empty: the backend's usual ones)."""

    path: str
    gguf_file: str | None = None
    identity: JSONObject = field(default_factory=dict)


_SHA_CACHE: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """Full SHA-256 of a file, computed once per (path, size, mtime) in this process."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _SHA_CACHE:
        h = hashlib.sha256()
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
        _SHA_CACHE[key] = h.hexdigest()
    return _SHA_CACHE[key]


def resolve_weights(model: str, gguf_file: str | None = None) -> WeightsSource:
    """Where a spec's model comes from.

    * ``gguf_file`` given: ``model`` is the folder holding that GGUF file (dequantised by
      transformers on load); the file's SHA-256 identifies it;
    * ``model`` is a ``.gguf`` file: the same, with its folder and name;
    * ``model`` is the short name of a packaged model (``smollm2-135m-instruct``, see
      :mod:`harness.modelstore`): its checkpoint directory, materialised on first use; the record's
      weights fingerprint and source file hash identify it;
    * anything else: loaded as it is (a directory or a Hub id)."""
    if gguf_file is not None:
        folder = Path(model).expanduser()
        f = folder / str(gguf_file)
        if not folder.is_dir() or not f.is_file():
            raise FileNotFoundError(
                f"gguf_file={gguf_file!r}: no such file in {model!r}; name the folder that holds the GGUF file "
                f"and the file's name (hf:/path/to/folder,gguf_file=model.Q4_1.gguf), or the file itself "
                f"(hf:/path/to/model.Q4_1.gguf)"
            )
        return WeightsSource(str(folder), f.name, {"gguf_file": f.name, "gguf_sha256": file_sha256(f)})
    if model.endswith(".gguf") and Path(model).expanduser().is_file():
        return resolve_weights(str(Path(model).expanduser().parent), Path(model).name)
    from harness.modelstore import get_model, is_packaged_name, read_record, resolve, weights_fingerprint

    if is_packaged_name(model) and not get_model(model).kind.startswith("causal LM"):
        entry = get_model(model)
        raise ValueError(f"packaged model {entry.name!r} is a {entry.kind}, not a causal LM; use {entry.use}")
    packaged = resolve(model)
    if packaged is None:
        return WeightsSource(model)
    src = (read_record(packaged) or {}).get("source", {})
    return WeightsSource(
        str(packaged),
        None,
        {
            "model_fingerprint": weights_fingerprint(packaged),
            "materialised_from": f"{src.get('package')} {src.get('package_version')} {src.get('file')}",
            "source_sha256": src.get("sha256"),
        },
    )


def short_sha(data: str | bytes, n: int = 16) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()[:n]


def resolve_chat_template(
    override: str | None, tokenizer_template: str | dict | None, model: str
) -> tuple[str, str]:
    """Return ``(name, jinja)`` of the template to use.

    ``override`` is a built-in name (``alpaca``, ``plain``), a path to a ``.jinja`` file, or a Jinja
    string; ``None`` means the tokenizer's own template.
    """
    if override is not None:
        override = str(override)
        if override in BUILTIN_TEMPLATES:
            return override, BUILTIN_TEMPLATES[override]
        if _is_file(override):
            return "file", Path(override).expanduser().read_text(encoding="utf-8")
        if "{{" in override or "{%" in override:
            return "custom", override
        if override.endswith(".jinja"):
            raise ChatTemplateError(f"chat template file not found: {override}")
        raise ChatTemplateError(
            f"chat_template={override!r} is neither a built-in template ({', '.join(BUILTIN_TEMPLATES)}), "
            "an existing .jinja file, nor a Jinja string"
        )
    if isinstance(tokenizer_template, dict):
        tokenizer_template = tokenizer_template.get("default")
    if not tokenizer_template:
        raise ChatTemplateError(
            f"the tokenizer of {model} has no chat template; pass chat_template=alpaca|plain|<jinja string or "
            "path to a .jinja file> (e.g. 'hf:<model>,chat_template=alpaca' for xDial-Eval's Alpaca format)"
        )
    return "tokenizer", tokenizer_template


def _is_file(s: str) -> bool:
    if "\n" in s or "{" in s:
        return False
    try:
        return Path(s).expanduser().is_file()
    except (OSError, ValueError):  # e.g. a name too long to be a path
        return False


def local_model_fingerprint(path: str | Path) -> str:
    """Cheap fingerprint of a local model directory: config bytes + weight/tokenizer file names and sizes."""
    root = Path(path)
    h = hashlib.sha256()
    for name in _HASHED_FILES:
        f = root / name
        if f.is_file():
            h.update(f"{name}\0".encode())
            h.update(f.read_bytes())
    for f in sorted(root.rglob("*")):
        if not f.is_file() or any(part.startswith(".") for part in f.relative_to(root).parts):
            continue
        name = f.name
        if name.endswith(_WEIGHT_SUFFIXES) or name.endswith(".index.json") or name in _TOKENIZER_FILES:
            h.update(f"{f.relative_to(root).as_posix()}\0{f.stat().st_size}\n".encode())
    return h.hexdigest()[:16]


def adapter_files(adapter_dir: str | Path) -> list[Path]:
    root = Path(adapter_dir)
    files = sorted(
        f
        for f in root.iterdir()
        if f.is_file() and f.name.startswith("adapter_") and f.suffix in (".safetensors", ".bin", ".json")
    )
    if not any(f.suffix in (".safetensors", ".bin") for f in files):
        raise FileNotFoundError(f"no adapter weights (adapter_model.safetensors / .bin) found in {root}")
    return files


def adapter_sha(adapter_dir: str | Path) -> str:
    """sha256 (short) of a PEFT adapter's weight and config files (adapters are small: hash the bytes)."""
    h = hashlib.sha256()
    for f in adapter_files(adapter_dir):
        h.update(f"{f.name}\0".encode())
        with f.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
    return h.hexdigest()[:16]


# -- device and dtype -----------------------------------------------------------------------------
#: dtype name a spec may use -> the ``torch`` attribute
DTYPE_ALIASES = {
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
}


def resolve_device(device: str | None) -> str:
    """``None`` / ``"auto"`` → ``"cuda"`` when a GPU is visible, else ``"cpu"``; anything else as given."""
    if device in (None, "auto"):
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return str(device)


def resolve_dtype(dtype: str | torch.dtype | None, device: str) -> torch.dtype:
    """A ``torch.dtype`` from a name (``bf16``, ``float16``, ...) or ``auto``: bf16 (else fp16) on
    CUDA, fp32 on CPU."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    key = str(dtype).lower().removeprefix("torch.")
    if key not in DTYPE_ALIASES:
        raise ValueError(f"unknown dtype {dtype!r}; use auto, {', '.join(DTYPE_ALIASES)}")
    return getattr(torch, DTYPE_ALIASES[key])
