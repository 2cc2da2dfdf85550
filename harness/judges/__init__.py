"""Judges: the role that turns task items into scored verdicts.

``load_judge("kind:target,...")`` creates one (:mod:`harness.judges.loader`); the kinds are
registered in :mod:`harness.spec.kinds` (built-in, and one LLM kind per backend kind) or by
plug-ins (entry-point groups ``dialeval_harness.judges`` and ``dialeval_harness.backends``). One module per kind: :mod:`~harness.judges.llm` (hf / vllm / openai /
replay backends), :mod:`~harness.judges.embedding`, :mod:`~harness.judges.metric` (with the
reference metrics of :mod:`~harness.judges.refmetrics`), :mod:`~harness.judges.learned.judge` (learned
ensembles of :mod:`~harness.judges.learned.fit`), :mod:`~harness.judges.mean_ensemble`.
"""

from harness.judges.base import Judge, Verdict
from harness.judges.loader import DEFAULT_JUDGE, judge_class, judge_items, load_judge

__all__ = ["DEFAULT_JUDGE", "Judge", "Verdict", "judge_class", "judge_items", "load_judge"]
