"""CPDScore (ComperDial, Wakaki et al. 2024, App. B): LLM-judged humanness of responses.

:mod:`~tasks.cpdscore.prompts` (Simple / Detail, with and without reference, the two-step dialogue
score), :mod:`~tasks.cpdscore.scoring` (three seeded calls averaged, turn / dialogue / system
correlations), :mod:`~tasks.cpdscore.task` (the ``harness run`` protocol of the tasks below) and the
`evaluate` module ``tasks/cpdscore/cpdscore.py``.

Tasks (group ``cpdscore``), over any common-schema dataset (``configs=("*",)``: every config at the
task's input level; the default ``--source`` builder is ``upheld``; an imported ComperDial works
through ``--dataset``):

* ``cpdscore-s-ref`` / ``cpdscore-s-noref`` / ``cpdscore-d-ref`` / ``cpdscore-d-noref``: turn level,
  correlated per turn and per (system, dialogue_id) and per system (Table 4, footnote 9);
* ``cpdscore-dial`` (+ ``-intermediate``): CPDS-Dial on dialogue-level configs (Table 5);
* ``cpdscore-dial-turns`` (+ ``-intermediate``): CPDS-Dial on turn-level configs grouped into
  dialogues per (dialogue_id, system); human = mean of the turn labels (App. C.1.2).

The human score is the task dimension ``overall`` where the dataset has it (ComperDial), else the
dataset's headline rating (UPHELD: content).
"""

from harness.languages import LANGUAGES
from harness.scorers import ParseScore
from harness.tasks import PromptTemplate, TaskSpec, register_task
from harness.types import GenerationConfig
from tasks.cpdscore.prompts import DIALOGUE, PAPER, TURN_PROMPTS
from tasks.cpdscore.scoring import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE
from tasks.cpdscore.task import PROTOCOLS

CITATION = """@article{wakaki2024comperdial,
  title={ComperDial: Commonsense Persona-grounded Dialogue Dataset and Benchmark},
  author={Wakaki, Hiromi and Mitsufuji, Yuki and Maeda, Yoshinori and Nishimura, Yukiko and Gao, Silin
          and Zhao, Mengjie and Yamada, Keiichi and Bosselut, Antoine},
  journal={arXiv preprint arXiv:2406.11228}, year={2024}
}"""
PROCEDURE = "tasks.cpdscore.task:score_items"
# The prompt is English for every language (as in the paper); the task accepts any language.
ALL_LANGUAGES = ("en", *(c for c in LANGUAGES if c != "en"))


def _template(name: str) -> PromptTemplate:
    """The TaskSpec view of a CPDScore prompt (what ``harness validate`` and results record; the
    protocol in :mod:`tasks.cpdscore.task` renders the real prompt, Person A / B history and fact)."""
    proto = PROTOCOLS[name]
    if proto.kind == "turn":
        p = TURN_PROMPTS[(proto.variant, proto.with_reference)]
        user = p.template.replace("{history}", "{conversation}").replace(
            "{fact}", "(the item's persona, else None)"
        )
    else:
        p = DIALOGUE
        user = p.template.replace("{turn_scores}", "(step-1 CPDS-D turn scores)").replace(
            "{responses}", "{dialogue}"
        )
    return PromptTemplate(
        name=p.name, user=user, source=f"{p.source}; rendered by {PROCEDURE}", version=p.sha256[:12]
    )


def _task(name: str) -> TaskSpec:
    proto = PROTOCOLS[name]
    turn = proto.kind == "turn"
    what = {
        "turn": f"CPDS-{proto.variant.capitalize()} {'with' if proto.with_reference else 'without'} reference",
        "dialogue": "CPDS-Dial (step 1 CPDS-D w/o ref) on dialogue-level configs",
        "grouped": "CPDS-Dial (step 1 CPDS-D w/o ref) on turn-level configs grouped per (dialogue_id, system)",
    }[proto.kind]
    if not turn:
        what += f", score = mean {'Final Score' if proto.output == 'final' else 'intermediate Overall Dialogue Turn Score'}"
    tpl = _template(name)
    return TaskSpec(
        name=name,
        description=f"{what}; mean of n_calls (default 3) seeded calls ({PAPER}).",
        builder="upheld",
        configs=("*",),
        level="turn" if turn else "dialogue",
        dimension="overall",
        languages=ALL_LANGUAGES,
        templates=dict.fromkeys(ALL_LANGUAGES, tpl),
        scorer=ParseScore(range=(1.0, 5.0)),
        metrics=("pearson", "spearman", "kendall"),
        generation=GenerationConfig(temperature=DEFAULT_TEMPERATURE, max_tokens=DEFAULT_MAX_TOKENS),
        group="cpdscore",
        evaluate_dir="tasks/cpdscore",
        citation=CITATION,
        procedure=PROCEDURE,
        prepare="tasks.cpdscore.task:group_turns" if proto.kind == "grouped" else None,
        input_level="turn" if proto.kind == "grouped" else None,
        levels=("dialogue", "system") if turn else ("system",),
    )


CPDSCORE_TASKS = {name: register_task(_task(name)) for name in PROTOCOLS}
