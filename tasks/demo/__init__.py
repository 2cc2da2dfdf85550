"""The embedded demo benchmark: a small multilingual set written by this project (not copied from
anywhere) in the xDial-Eval format, so the README's main command runs offline on a fresh machine.
Same prompts, scoring and meta-evaluation as the xDial-Eval tasks; the ratings are illustrative."""

from harness.tasks import register_task
from tasks.xdial_eval import xdial_style_tasks

DEMO_TURN, DEMO_DIALOGUE = (
    register_task(t)
    for t in xdial_style_tasks(
        group="demo",
        builder="demo",
        turn_configs=("demo-turn",),
        dialogue_configs=("demo-dial",),
        about="Demo (written by this project; illustrative ratings)",
    )
)
