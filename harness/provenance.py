"""What every result records about where it came from: harness version + git sha, library
versions, platform and device."""

from __future__ import annotations

import datetime as _dt
import platform
import re
import subprocess
import sys
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import harness
from harness.jsontypes import JSONObject

LIBRARIES = (
    "torch",
    "transformers",
    "tokenizers",
    "datasets",
    "evaluate",
    "huggingface_hub",
    "sentence-transformers",
    "peft",
    "accelerate",
    "numpy",
    "scipy",
    "scikit-learn",
    "pandas",
    "pyarrow",
    "httpx",
    "tenacity",
    "vllm",
)


@lru_cache(maxsize=1)
def git_info() -> JSONObject:
    """Git sha of the harness source tree (None when not installed from a checkout)."""
    root = Path(harness.__file__).resolve().parents[1]
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout.strip()
        )
        return {"git_sha": sha, "git_dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"git_sha": None, "git_dirty": None}


def library_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for lib in LIBRARIES:
        try:
            out[lib] = version(lib)
        except PackageNotFoundError:
            out[lib] = None
    return out


def device_info() -> JSONObject:
    info: JSONObject = {"cpu_count": _cpu_count()}
    try:
        import torch

        info["cuda_available"] = bool(torch.cuda.is_available())
        if info["cuda_available"]:
            info["cuda_devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception:  # torch missing or broken: record, don't fail a run over provenance
        info["cuda_available"] = None
    return info


def _cpu_count() -> int | None:
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count()


def environment() -> JSONObject:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "libraries": {**library_versions()},
        "device": device_info(),
    }


def harness_info() -> JSONObject:
    return {"version": harness.__version__, **git_info()}


_URL_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")


def redact(text: str) -> str:
    """Strip credentials embedded in URLs (``https://user:key@host`` → ``https://***@host``)."""
    return _URL_USERINFO.sub(r"\g<scheme>***@", text)


def utc_now() -> str:
    """The current UTC time as ISO 8601 with a ``Z`` suffix, to the second."""
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
