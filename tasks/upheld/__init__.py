"""UPHELD tasks (Subasic et al., 2026): how well a judge agrees with the human labels of model
continuations compared to the human continuation (Option A = reference, Option B = response).

* ``upheld-content`` / ``upheld-style`` / ``upheld-reasonableness`` (group ``upheld``): the
  human target is the per-item mean of the dimension's labels; an LLM judge uses the App. H
  yes/no prompt, a ``metric:`` judge a reference metric (App. F), an ``ensemble:`` judge a
  fitted App. I ensemble.
* ``upheld-<dimension>-<variant>`` (group ``upheld-app-h``): the four App. H prompts (yes/no,
  yes/no + explanation, Likert 1–5, Likert 1–5 + explanation), written verdicts parsed from text;
  a parse failure is a ``None`` score, counted, raw output kept.

The App. B correlations (Pearson / Cramér's V / point-biserial, per annotator row or per item,
5-fold held-out folds, system level) and the Tables 7–9 reproduction are in
:mod:`tasks.upheld.reproduce` (``harness reproduce upheld``), its protocols in
:mod:`tasks.upheld.protocols`.
"""

from dataset_builders.upheld.builder import UPHELD_CITATION
from harness.tasks import TaskSpec, register_task
from harness.types import GenerationConfig
from tasks.upheld.templates import JUDGE_PROMPTS

DIMENSIONS = {
    "content": "content equivalence of Option B to the human reference (Likert 1–5)",
    "style": "style equivalence of Option B to the human reference (1–3)",
    "reasonableness": "reasonableness of Option B as a continuation (binary)",
}
CONFIGS = ("main", "llm_arena", "topical_chat")
SHORT = {
    "llm_judge_yes_no": "yes_no",
    "llm_judge_yes_no_explain": "yes_no_explain",
    "llm_judge_likert_1_5": "likert",
    "llm_judge_likert_1_5_explain": "likert_explain",
}


def _task(name: str, dimension: str, feature: str, group: str) -> TaskSpec:
    template, scorer, max_tokens = JUDGE_PROMPTS[feature]
    return TaskSpec(
        name=name,
        description=f"UPHELD {DIMENSIONS[dimension]}; LLM judges use the App. H {feature} prompt.",
        builder="upheld",
        configs=CONFIGS,
        level="turn",
        dimension=dimension,
        languages=("en",),
        templates={"en": template},
        scorer=scorer,
        metrics=("pearson", "spearman", "kendall"),
        generation=GenerationConfig(temperature=0.0, max_tokens=max_tokens),
        group=group,
        evaluate_dir="tasks/upheld",
        citation=UPHELD_CITATION,
    )


UPHELD_TASKS = {
    dim: register_task(_task(f"upheld-{dim}", dim, "llm_judge_yes_no", "upheld")) for dim in DIMENSIONS
}
UPHELD_APP_H_TASKS = {
    (dim, feature): register_task(_task(f"upheld-{dim}-{SHORT[feature]}", dim, feature, "upheld-app-h"))
    for dim in DIMENSIONS
    for feature in JUDGE_PROMPTS
}
