"""CPDScore (ComperDial, Wakaki et al. 2024) as an `evaluate` module: LLM-judged humanness of
dialogue responses (CPDScore-Simple / -Detail, with or without the gold reference response,
mean over three calls) and Pearson / Spearman / Kendall correlations with human scores at turn,
dialogue and system level.

A thin adapter over :mod:`tasks.cpdscore.scoring`:
    >>> import evaluate
    >>> m = evaluate.load("tasks/cpdscore")
    >>> m.compute(contexts=[["hi!", "hello, how are you?", "great, you?"]], responses=["fine, thanks"],
    ...           references=["not bad at all"], systems=["bot"], dialogue_ids=["d1"], human_scores=[4.0],
    ...           judge="openai:gpt-4-turbo-2024-04-09", variant="detail", with_reference=False)
"""

import datasets
import evaluate

from harness.cache import RequestCache
from tasks.cpdscore.scoring import CPDScorer, correlate_levels, turn_frame

_CITATION = """@inproceedings{wakaki2024comperdial,
  title={ComperDial: Commonsense Persona-grounded Dialogue Dataset and Benchmark},
  author={Wakaki, Hiromi and Mitsufuji, Yuki and Maeda, Yoshinori and Nishimura, Yukiko and Gao, Silin
          and Zhao, Mengjie and Yamada, Keiichi and Bosselut, Antoine},
  year={2024}
}"""

_DESCRIPTION = """Score dialogue responses for humanness with the CPDScore prompts (ComperDial App. B) using
any generative dialeval-harness judge (hf, vllm, openai, replay), average over n_calls sampled
calls, and correlate with human scores per turn, per dialogue (mean of its turn scores) and per
system (mean of its turn scores)."""

_KWARGS_DESCRIPTION = """
Inputs (one entry per rated turn):
    contexts: list of list of str, the dialogue history, oldest first (the last utterance is the
        user's; roles alternate backwards from it)
    responses: list of str, the rated responses
    references: list of str (or None), gold reference responses; needed only with with_reference=True
    systems: list of str, the system that produced each response
    dialogue_ids: list of str, the conversation each turn belongs to
    human_scores: list of float, human ratings
Keyword arguments:
    judge: judge spec string (required), e.g. "openai:gpt-4-turbo-2024-04-09", "hf:Qwen/Qwen2.5-7B-Instruct"
    variant: "detail" (default) or "simple"; with_reference: bool (default False)
    n_calls: calls averaged per item (default 3); temperature (default: spec's, else 1.0); seed (default 0)
    max_tokens: generation limit (default: spec's, else 256)
    cache_path: request-cache SQLite file (default: none, every call runs)
Returns:
    scores: mean score per item (None when no call parsed); n_parsed: parsed calls per item
    parse_failures: unparseable calls in total
    turn, dialogue, system: {pearson, spearman, kendall: {value, p_value, n}}
    prompt, prompt_sha256: the prompt template used
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class CPDScore(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "contexts": datasets.Sequence(datasets.Value("string")),
                    "responses": datasets.Value("string"),
                    "references": datasets.Value("string"),
                    "systems": datasets.Value("string"),
                    "dialogue_ids": datasets.Value("string"),
                    "human_scores": datasets.Value("float64"),
                }
            ),
            homepage="https://huggingface.co/datasets/Sony/ComperDial",
        )

    def _compute(
        self,
        contexts,
        responses,
        references,
        systems,
        dialogue_ids,
        human_scores,
        judge=None,
        variant="detail",
        with_reference=False,
        n_calls=3,
        temperature=None,
        seed=0,
        max_tokens=None,
        cache_path=None,
    ):
        if not judge:
            raise ValueError(
                "CPDScore needs a generative judge spec, e.g. judge='openai:gpt-4-turbo-2024-04-09'"
            )
        records = [
            {
                "id": str(i),
                "context": _context(contexts[i]),
                "response": responses[i],
                "reference": references[i],
                "system": systems[i],
                "dialogue_id": dialogue_ids[i],
                "rating": human_scores[i],
            }
            for i in range(len(responses))
        ]
        cache = RequestCache(cache_path, enabled=cache_path is not None)
        try:
            with CPDScorer(
                judge, variant, with_reference, n_calls, temperature, seed, max_tokens, cache=cache
            ) as sc:
                scores = sc.score_turns(records)
                prompt = sc.prompt
        finally:
            cache.close()
        return {
            "scores": [s.score for s in scores],
            "n_parsed": [s.n_parsed for s in scores],
            "parse_failures": sum(s.parse_failures for s in scores),
            **correlate_levels(turn_frame(scores)),
            "prompt": prompt.name,
            "prompt_sha256": prompt.sha256,
        }


def _context(utterances):
    """Roles alternate backwards from the response: the last context utterance is the user's."""
    n = len(utterances)
    return [
        {"role": "user" if (n - 1 - k) % 2 == 0 else "assistant", "text": t} for k, t in enumerate(utterances)
    ]
