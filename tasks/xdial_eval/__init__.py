"""xDial-Eval tasks (Zhang et al., 2023): turn-level context relevance and dialogue-level coherence
over the benchmark's 12 turn-level and 6 dialogue-level sets in 10 languages, scored with P(Yes)
(§4) and meta-evaluated with per-dataset × language Pearson/Spearman, their per-language average
over datasets and the overall average over languages (end of §4; Tables 4–5)."""

from dataset_builders.xdial_eval import XDIAL_CITATION, XDIAL_SETS
from harness.languages import XDIAL_LANGUAGES
from harness.scorers import PYes
from harness.tasks import TaskSpec, register_task
from tasks.xdial_eval.templates import DIALOGUE_COHERENCE, TURN_RELEVANCE

# Config names of the xdial-eval dataset builder (one per Table 1 set), per level.
TURN_CONFIGS = tuple(s.stem for s in XDIAL_SETS if s.level == "turn")
DIALOGUE_CONFIGS = tuple(s.stem for s in XDIAL_SETS if s.level == "dialogue")


def xdial_style_tasks(
    *,
    group: str,
    builder: str,
    turn_configs: tuple[str, ...],
    dialogue_configs: tuple[str, ...],
    about: str,
    citation: str = "",
    languages: tuple[str, ...] = XDIAL_LANGUAGES,
) -> tuple[TaskSpec, TaskSpec]:
    """The xDial-Eval pair of tasks (``<group>-turn``, ``<group>-dialogue``) over any dataset in
    the common schema: Table 3 templates, P(Yes) scoring, Pearson/Spearman meta-evaluation."""
    common = dict(
        builder=builder,
        languages=languages,
        scorer=PYes(),
        group=group,
        evaluate_dir="tasks/xdial_eval",
        citation=citation,
    )
    turn = TaskSpec(
        name=f"{group}-turn",
        description=f"{about} turn level: is the response relevant to the context? P(Yes) vs human rating.",
        configs=turn_configs,
        level="turn",
        dimension="relevance",
        templates={lang: TURN_RELEVANCE for lang in languages},
        embedding_method="context_response_cosine",
        **common,
    )
    dialogue = TaskSpec(
        name=f"{group}-dialogue",
        description=f"{about} dialogue level: is the dialogue coherent? P(Yes) vs human rating.",
        configs=dialogue_configs,
        level="dialogue",
        dimension="coherence",
        templates={lang: DIALOGUE_COHERENCE for lang in languages},
        embedding_method="adjacent_turn_cosine",
        **common,
    )
    return turn, dialogue


XDIAL_TURN, XDIAL_DIALOGUE = (
    register_task(t)
    for t in xdial_style_tasks(
        group="xdial-eval",
        builder="xdial-eval",
        turn_configs=TURN_CONFIGS,
        dialogue_configs=DIALOGUE_CONFIGS,
        about="xDial-Eval",
        citation=XDIAL_CITATION,
    )
)
