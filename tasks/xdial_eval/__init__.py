"""xDial-Eval tasks (Zhang et al., 2023): turn-level context relevance and dialogue-level coherence
over the benchmark's 12 turn-level and 6 dialogue-level sets in 10 languages, scored with P(Yes)
(§4) and meta-evaluated with per-dataset × language Pearson/Spearman, their per-language average
over datasets and the overall average over languages (end of §4; Tables 4–5)."""

from dataset_builders.xdial_eval import XDIAL_CITATION, XDIAL_SETS
from harness.languages import XDIAL_LANGUAGES
from harness.tasks import TaskSpec, register_task
from tasks.xdial_eval.templates import DIALOGUE_COHERENCE, TURN_RELEVANCE

# Config names of the xdial-eval dataset builder (one per Table 1 set), per level.
TURN_CONFIGS = tuple(s.stem for s in XDIAL_SETS if s.level == "turn")
DIALOGUE_CONFIGS = tuple(s.stem for s in XDIAL_SETS if s.level == "dialogue")

XDIAL_TURN = register_task(
    TaskSpec(
        name="xdial-eval-turn",
        description="xDial-Eval turn level: is the response relevant to the context? P(Yes) vs mean human rating.",
        builder="xdial-eval",
        configs=TURN_CONFIGS,
        level="turn",
        dimension="relevance",
        languages=XDIAL_LANGUAGES,
        templates={lang: TURN_RELEVANCE for lang in XDIAL_LANGUAGES},
        scoring="p_yes",
        embedding_method="context_response_cosine",
        group="xdial-eval",
        evaluate_module="tasks/xdial_eval",
        citation=XDIAL_CITATION,
    )
)

XDIAL_DIALOGUE = register_task(
    TaskSpec(
        name="xdial-eval-dialogue",
        description="xDial-Eval dialogue level: is the dialogue coherent? P(Yes) vs mean human rating.",
        builder="xdial-eval",
        configs=DIALOGUE_CONFIGS,
        level="dialogue",
        dimension="coherence",
        languages=XDIAL_LANGUAGES,
        templates={lang: DIALOGUE_COHERENCE for lang in XDIAL_LANGUAGES},
        scoring="p_yes",
        embedding_method="adjacent_turn_cosine",
        group="xdial-eval",
        evaluate_module="tasks/xdial_eval",
        citation=XDIAL_CITATION,
    )
)
