"""The embedded demo benchmark: a small multilingual set written by this project (not copied from
anywhere) in the xDial-Eval format, so the README's main command runs offline on a fresh machine.
Same prompts, scoring and meta-evaluation as the xDial-Eval tasks."""

from harness.languages import XDIAL_LANGUAGES
from harness.tasks import TaskSpec, register_task
from tasks.xdial_eval.templates import DIALOGUE_COHERENCE, TURN_RELEVANCE

DEMO_TURN = register_task(
    TaskSpec(
        name="demo-turn",
        description="Demo (written by this project): response relevance in 10 languages; illustrative ratings.",
        builder="demo",
        configs=("demo-turn",),
        level="turn",
        dimension="relevance",
        languages=XDIAL_LANGUAGES,
        templates={lang: TURN_RELEVANCE for lang in XDIAL_LANGUAGES},
        scoring="p_yes",
        embedding_method="context_response_cosine",
        group="demo",
        evaluate_module="tasks/xdial_eval",
    )
)

DEMO_DIALOGUE = register_task(
    TaskSpec(
        name="demo-dialogue",
        description="Demo (written by this project): dialogue coherence in 10 languages; illustrative ratings.",
        builder="demo",
        configs=("demo-dial",),
        level="dialogue",
        dimension="coherence",
        languages=XDIAL_LANGUAGES,
        templates={lang: DIALOGUE_COHERENCE for lang in XDIAL_LANGUAGES},
        scoring="p_yes",
        embedding_method="adjacent_turn_cosine",
        group="demo",
        evaluate_module="tasks/xdial_eval",
    )
)
