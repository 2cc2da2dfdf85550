"""A Ray worker's watch on its driver, without Ray: the watching process exits the moment the
driver process dies, and a driver on another machine (another boot id) is not watched."""

import os
import subprocess
import sys
import time

import pytest

from harness.executors.worker import DRIVER_GONE_EXIT, DriverWatch, process_identity

pytestmark = pytest.mark.skipif(
    not hasattr(os, "pidfd_open"), reason="the watch needs a pidfd (Linux >= 5.3)"
)

WATCHER = """
import sys, time
from harness.executors.worker import DriverWatch, process_identity
watch = DriverWatch(process_identity(int(sys.argv[1])))
print(watch.active, flush=True)
time.sleep(60)
"""


def test_a_worker_exits_the_moment_its_driver_dies():
    driver = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    watcher = subprocess.Popen(
        [sys.executable, "-c", WATCHER, str(driver.pid)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        assert watcher.stdout.readline().strip() == b"True"
        driver.kill()
        t0 = time.monotonic()
        assert watcher.wait(timeout=5) == DRIVER_GONE_EXIT
        assert time.monotonic() - t0 < 1
    finally:
        driver.kill()
        watcher.kill()


def test_a_driver_on_another_machine_is_not_watched():
    me = process_identity()
    assert DriverWatch(me).active  # this very process: watchable
    assert not DriverWatch({**me, "boot_id": "another-machine"}).active
    assert not DriverWatch({**me, "start": (me["start"] or 0) + 1}).active  # pid reused by another process
    assert not DriverWatch(None).active


def test_the_responses_a_stopping_worker_saves_are_cache_hits_for_the_driver(tmp_path):
    """The keys and values a worker writes for a stopped driver are the driver's own: a rerun
    through the cache finds every saved response and sends nothing."""
    from harness.backends.base import create_local_backend
    from harness.cache import CachedBackend, RequestCache
    from harness.executors.worker import ModelWorker
    from harness.spec import parse_spec
    from harness.types import ChatMessage, GenerationConfig, Request

    rules = tmp_path / "judge.jsonl"
    rules.write_text('{"default": {"hashed_p_yes": true, "text": "Yes"}}\n', encoding="utf-8")
    spec = parse_spec(f"replay:{rules}")
    cfg = GenerationConfig(max_tokens=4, logprobs=True, top_logprobs=5)
    requests = [Request(messages=(ChatMessage("user", f"question {i}"),), config=cfg) for i in range(7)]
    worker = ModelWorker()
    worker.ping(process_identity())  # the "driver" is this very process: watched, never gone
    cache_path = tmp_path / "cache.sqlite"
    worker.setup("m0", "backend", spec, cache=str(cache_path))
    for shard in (requests[:3], requests[3:5], requests[5:]):  # only the last two shards are kept
        sent = list(worker.generate("m0", shard))
        assert sum(len(m) for m in sent if isinstance(m, list)) == len(shard)
    worker.save_recent()
    cache = RequestCache(cache_path)
    backend = create_local_backend(spec)
    out = CachedBackend(backend, cache).generate(requests)
    assert [r.cached for r in out] == [False] * 3 + [True] * 4
    assert backend.stats.requests == 3  # shard 1 was not kept, the 4 saved ones were hits
    fresh = create_local_backend(spec).generate(requests)
    assert [r.to_dict() for r in out[3:]] == [r.to_dict() for r in fresh[3:]]
    cache.close()
