"""Translation QA of translated benchmarks (xDial-Eval §3.2, Table 2; ``harness datasets qa``):
parallel segments (:mod:`~harness.qa.segments`), the scoring methods — LLM adequacy with the App. A
prompt, back-translation BLEU / chrF / BERTScore, CometKiwi, cross-lingual similarity —
(:mod:`~harness.qa.scores`), outlier flags and a new flagged dataset version (:mod:`~harness.qa.run`).
"""
