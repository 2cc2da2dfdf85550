"""The Ray actor of a pool: one backend (hf / vllm / openai / replay) or one text encoder (the
``embed:`` judge's), created in the actor's process, answering shards of requests.

It is a plain class; :mod:`harness.executors.pool` wraps it with ``ray.remote`` (Ray stays an
optional import). Results stream back as they finish: :meth:`ModelWorker.generate` runs the
backend in a helper thread and yields ``[(index, response), ...]`` lists as the backend reports
them, then a ``{"stats": ...}`` dict, so the driver writes each response through its cache as it
arrives and, when a worker dies mid-shard, retries only what did not come back.
"""

from __future__ import annotations

import os
import queue
import random
import socket
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from harness.spec import JudgeSpec
from harness.types import Request

_END = object()


class ModelWorker:
    def __init__(self) -> None:
        self.obj: Any = None
        self.role = ""

    def setup(
        self,
        role: str,
        spec: JudgeSpec,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        seed: int | None = None,
        threads: int | None = None,
    ) -> dict[str, Any]:
        """Create the backend (``role="backend"``) or encoder (``role="encoder"``) ``spec`` names;
        returns where this worker runs and what it holds (identity, capabilities)."""
        t0 = time.perf_counter()
        os.environ.update(env or {})
        if cwd and os.path.isdir(cwd):  # relative paths in specs mean what they mean on the driver
            os.chdir(cwd)
        self.role = role
        if role == "backend":
            from harness.backends.base import create_local_backend

            self.obj = create_local_backend(spec)
        elif role == "encoder":
            from harness.encoders import encoder_from_options

            self.obj = encoder_from_options(spec.target, spec.revision, spec.options)
        else:
            raise ValueError(f"unknown worker role {role!r}")
        torch = sys.modules.get("torch")
        if torch is not None and threads:
            torch.set_num_threads(int(threads))
        if seed is not None:
            random.seed(seed)
            if "numpy" in sys.modules:
                sys.modules["numpy"].random.seed(seed % 2**32)
            if torch is not None:
                torch.manual_seed(seed)
        info = self._where()
        info.update(identity=self.obj.identity(), setup_s=time.perf_counter() - t0)
        if role == "encoder":
            info.update(prefixes=dict(self.obj.prefixes), engine=self.obj.engine)
        return info

    @staticmethod
    def _where() -> dict[str, Any]:
        info: dict[str, Any] = {"hostname": socket.gethostname(), "pid": os.getpid()}
        try:
            import ray

            info["node_ip"] = ray.util.get_node_ip_address()
            info["gpu_ids"] = [str(g) for g in ray.get_gpu_ids()]
        except Exception:  # outside Ray (unit use): no node address
            info["node_ip"], info["gpu_ids"] = None, []
        return info

    def _stats(self) -> dict[str, Any]:
        stats = getattr(self.obj, "stats", None)
        out = dict(stats.to_dict()) if stats is not None else {}
        out["load_seconds"] = float(out.get("load_seconds", getattr(self.obj, "load_seconds", 0.0)) or 0.0)
        return out

    def generate(self, requests: Sequence[Request]) -> Iterator[Any]:
        """Stream ``[(i, Response), ...]`` as the backend reports them, then ``{"stats": ...}``."""
        out: queue.Queue[Any] = queue.Queue()
        errors: list[BaseException] = []

        def work() -> None:
            try:
                self.obj.generate(list(requests), on_result=lambda i, r: out.put((i, r)))
            except BaseException as e:  # re-raised in the actor's thread below
                errors.append(e)
            finally:
                out.put(_END)

        t = threading.Thread(target=work, name="worker-generate", daemon=True)
        t.start()
        done = False
        while not done:
            batch = [out.get()]
            while True:  # everything else already finished goes in the same message
                try:
                    batch.append(out.get_nowait())
                except queue.Empty:
                    break
            if batch[-1] is _END:
                batch.pop()
                done = True
            if batch:
                yield batch
        t.join()
        if errors:
            raise errors[0]
        yield {"stats": self._stats()}

    def encode(self, texts: Sequence[str], role: str = "query") -> Iterator[Any]:
        """Unit vectors of ``texts`` as one ``[(i, vector), ...]`` message, then ``{"stats": ...}``."""
        emb = self.obj.encode(list(texts), role=role)
        yield list(enumerate(emb))
        yield {"stats": self._stats()}

    def ping(self) -> int:
        return os.getpid()

    def close(self) -> None:
        if self.obj is not None:
            self.obj.close()
            self.obj = None
