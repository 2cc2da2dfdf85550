"""ROUGE-1/2/L/Lsum of a model continuation against the human one, as an `evaluate` module
(UPHELD App. F, Tables 7-8 rows ``rouge1``, ``rouge2``, ``rougeL``, ``rougeLsum``).

A thin adapter over :func:`harness.judges.refmetrics.rouge_scores` (rouge-score, F-measure by default):
    >>> import evaluate
    >>> m = evaluate.load("tasks/rouge_ref")
    >>> m.compute(predictions=["the cat sat"], references=["a cat sat down"])["rouge1"]
"""

import datasets
import evaluate

from dataset_builders.upheld.builder import UPHELD_CITATION
from harness.judges.refmetrics import ROUGE_METRICS, rouge_scores

_LIN_2004 = """@inproceedings{lin-2004-rouge,
  title     = {{ROUGE}: A Package for Automatic Evaluation of Summaries},
  author    = {Lin, Chin-Yew},
  booktitle = {Text Summarization Branches Out},
  pages     = {74--81},
  year      = {2004},
}"""

_DESCRIPTION = """ROUGE between each prediction (the model continuation, UPHELD Option B) and its reference
(the human continuation, Option A): ROUGE-1 and ROUGE-2 (unigram / bigram overlap), ROUGE-L (longest
common subsequence) and ROUGE-Lsum (LCS over newline-separated sentences), computed with Google's
rouge-score package. Texts are passed as-is (newlines are kept: they are the sentence boundaries of
ROUGE-Lsum). rouge-score keeps only [a-z0-9] tokens, so texts in non-Latin scripts score 0."""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of str): model continuations (candidates).
    references (list of str): human continuations (one reference per prediction).
    use_stemmer (bool): Porter-stem tokens longer than 3 characters (default False).
    part (str): "fmeasure" (default), "precision" or "recall".
Returns:
    rouge1, rouge2, rougeL, rougeLsum: per-item lists (None where the reference or prediction is
        missing or empty: never 0, never dropped);
    means: {metric: mean over the valid items};
    invalid: number of invalid items; invalid_items: [{index, field, reason}];
    info: scorer provenance (rouge-score version, use_stemmer, part, counts, seconds).
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class RougeRef(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=UPHELD_CITATION + "\n\n" + _LIN_2004,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
            codebase_urls=["https://github.com/google-research/google-research/tree/master/rouge"],
            reference_urls=["https://aclanthology.org/W04-1013/"],
        )

    def _compute(self, predictions, references, use_stemmer=False, part="fmeasure"):
        result = rouge_scores(references, predictions, use_stemmer=use_stemmer, part=part)
        out = {m: result.scores[m] for m in ROUGE_METRICS}
        out["means"] = result.means()
        out["invalid"] = len({e["index"] for e in result.invalid})
        out["invalid_items"] = result.invalid
        out["info"] = result.info
        return out
