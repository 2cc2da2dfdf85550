"""Training data of the evaluator fine-tuning path (and the held-out targets of chatbot evaluation).

* :mod:`~finetune.data.sources` — :func:`load_dialogues`: plain dialogues from Topical-Chat, a
  built / registered common-schema dataset, or JSONL, with a :class:`LoadReport` of what was kept,
  skipped and dropped;
* :mod:`~finetune.data.selfsup` — xDial-Eval §4 / App. C.1 self-supervised pairs:
  :func:`relevance_pairs` (turn level, PoE: next-utterance discrimination with random and hard
  negatives) and :func:`coherence_pairs` (dialogue level, FineD-Eval: utterance-order shuffling and
  utterance replacement), balanced and deterministic for a seed;
* :mod:`~finetune.data.distill` — :func:`distillation_examples`: instruction examples (MEDAL
  Table 11 prompt -> the judge's verdict as Table 11 JSON) from MEDAL ``auto_labels``;
* :mod:`~finetune.data.supervised` — :func:`supervised_examples` from human labels (normalised mean
  rating or binarised) and :func:`split_by_dialogue` (no dialogue in both train and test);
* :mod:`~finetune.data.builder` — :func:`register_training_data` / :func:`load_training_data`:
  the examples as an immutable version in the dataset registry (Parquet + card + manifest);
* :mod:`~finetune.data.baseline` — :func:`fit_response_baseline`: a corpus statistic rather than
  training pairs, the mean embedding of ``n`` sampled utterances (the ``embed:`` judge's
  ``baseline=``; ``harness finetune baseline``);
* :mod:`~finetune.data.generative` — the generative (P(Yes)) evaluator's examples, prompts,
  tokenization and ``DATA`` (:func:`~finetune.data.generative.load_generative_data`);
* :mod:`~finetune.data.targets` — :func:`~finetune.data.targets.load_targets`: the held-out turns
  that ``harness chatbot-eval`` has chatbots generate, with their histories;
* :mod:`~finetune.data.order` — the order in which the trainer visits the examples (seeded
  per-epoch permutations, length grouping, per-process micro-batches).
"""

from finetune.data.builder import RegisteredDataset, load_training_data, register_training_data
from finetune.data.distill import DistillReport, InstructionExample, distillation_examples, target_json
from finetune.data.rows import EXAMPLE_FEATURES, INSTRUCTION_FEATURES, TrainingDataError
from finetune.data.selfsup import (
    KINDS,
    Example,
    ExampleList,
    PairReport,
    coherence_pairs,
    norm_text,
    relevance_pairs,
)
from finetune.data.sources import (
    LoadedDialogues,
    LoadReport,
    SourceDialogue,
    language_problem,
    load_dialogues,
)
from finetune.data.supervised import (
    DialogueSplit,
    SupervisedReport,
    known_dimensions,
    split_by_dialogue,
    supervised_examples,
)

__all__ = [
    "EXAMPLE_FEATURES",
    "INSTRUCTION_FEATURES",
    "KINDS",
    "DialogueSplit",
    "DistillReport",
    "Example",
    "ExampleList",
    "InstructionExample",
    "LoadReport",
    "LoadedDialogues",
    "PairReport",
    "RegisteredDataset",
    "SourceDialogue",
    "SupervisedReport",
    "TrainingDataError",
    "coherence_pairs",
    "distillation_examples",
    "known_dimensions",
    "language_problem",
    "load_dialogues",
    "load_training_data",
    "norm_text",
    "register_training_data",
    "relevance_pairs",
    "split_by_dialogue",
    "supervised_examples",
    "target_json",
]
