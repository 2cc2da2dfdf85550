import json
import sqlite3

from harness.backends.base import Backend, Capabilities
from harness.cache import CachedBackend, RequestCache
from harness.types import ChatMessage, GenerationConfig, Request, Response


class CountingBackend(Backend):
    kind = "counting"
    capabilities = Capabilities(choice_logprobs=True)

    def _generate(self, requests, emit):
        return [
            Response(text=f"echo:{r.messages[-1].content}", choice_logprobs={"Yes": -0.1, "No": -2.0})
            for r in requests
        ]


def req(text, **cfg):
    return Request(
        messages=(ChatMessage("user", text),), config=GenerationConfig(**cfg), choices=("Yes", "No")
    )


def test_write_through_and_hits(tmp_path):
    path = tmp_path / "c.sqlite"
    be = CountingBackend("m1")
    with RequestCache(path) as cache:
        cb = CachedBackend(be, cache)
        out = cb.generate([req("a"), req("b"), req("a")])
        assert [o.text for o in out] == ["echo:a", "echo:b", "echo:a"]
        assert be.stats.requests == 2  # duplicate inside the batch is sent once
        assert not any(o.cached for o in out)
    # new process-equivalent: reopen the file
    be2 = CountingBackend("m1")
    with RequestCache(path) as cache:
        out = CachedBackend(be2, cache).generate([req("a"), req("b")])
        assert be2.stats.requests == 0
        assert all(o.cached for o in out)
        assert out[0].choice_logprobs == {"Yes": -0.1, "No": -2.0}
        assert cache.stats.hits == 2 and cache.stats.misses == 0
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_key_covers_model_revision_and_decoding(tmp_path):
    with RequestCache(tmp_path / "c.sqlite") as cache:
        base = CachedBackend(CountingBackend("m1"), cache)
        base.generate([req("a")])
        for backend, r in [
            (CountingBackend("m2"), req("a")),  # other model
            (CountingBackend("m1", revision="r2"), req("a")),  # other revision
            (CountingBackend("m1"), req("a", temperature=0.5)),  # other decoding
            (CountingBackend("m1"), req("a", max_tokens=5)),
        ]:
            CachedBackend(backend, cache).generate([r])
            assert backend.stats.requests == 1
        # a non-semantic field (timeout) does not change the key
        be = CountingBackend("m1")
        CachedBackend(be, cache).generate([req("a", timeout=3.0)])
        assert be.stats.requests == 0


def test_disabled_cache_always_calls(tmp_path):
    cache = RequestCache(tmp_path / "c.sqlite", enabled=False)
    be = CountingBackend("m1")
    CachedBackend(be, cache).generate([req("a")])
    CachedBackend(be, cache).generate([req("a")])
    assert be.stats.requests == 2
    assert not (tmp_path / "c.sqlite").exists()


def test_each_response_committed_as_it_arrives(tmp_path):
    """A backend that dies mid-batch keeps the responses it already emitted."""

    class DiesMidway(Backend):
        kind = "dies"
        capabilities = Capabilities(choice_logprobs=True)

        def _generate(self, requests, emit):
            for i, r in enumerate(requests):
                if i == 2:
                    raise RuntimeError("killed")
                emit(i, Response(text=r.messages[-1].content))
            return []

    path = tmp_path / "c.sqlite"
    with RequestCache(path) as cache:
        try:
            CachedBackend(DiesMidway("m"), cache).generate([req(x) for x in "abcd"])
        except RuntimeError:
            pass
        assert cache.count() == 2
        rows = [json.loads(v) for (v,) in sqlite3.connect(path).execute("SELECT value FROM entries")]
        assert sorted(r["text"] for r in rows) == ["a", "b"]
