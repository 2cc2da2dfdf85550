"""MEEP tasks (Ferron et al., 2023): LLM judges of *engagingness* prompted with the MEEP prompt family
(App. A Tables 7-11) on the DSTC11 Track 4 sets MEEP used, meta-evaluated with Spearman and Pearson
correlations against the human ratings (Tables 3-5).

* group ``meep`` (turn level, §4 / Table 3): ``meep-naive``, ``meep-hd``, ``meep-meep``,
  ``meep-meep-sa`` and their role-assigned ``-r`` variants use the English prompt for every language
  (``en``, ``es``, ``zh``); ``meep-meep-sa-native`` / ``meep-meep-sa-r-native`` are the † variants of
  Table 4 (the Table 9 Spanish / Chinese translation for ``es`` / ``zh`` items, English for ``en``).
* group ``meep-dial`` (dialogue level, Table 5): ``meep-meep-sa-dial``, ``meep-meep-sa-r-dial``.
* group ``meep-baselines``: ``meep-geval`` (G-EVAL, turn), ``meep-geval-dial`` (G-EVAL-DIAL) and
  ``meep-gptscore`` (GPTScore: the log-prob of "Yes" in the echoed "Answer: Yes."; needs a backend
  that scores continuations, hf or vllm).

Scoring: the 0-100 prompts parse a score written anywhere in the reply (``parse_score``, range
0-100, decimals allowed); HD and G-EVAL parse an integer 1-3. A reply without a parsable score, or
with one outside the scale, is a parse failure (``None``, counted), never clipped and never 0.
"""

from harness.scorers import GPTScore, ParseScore, Scorer
from harness.tasks import TaskSpec, register_task
from harness.types import GenerationConfig
from tasks.meep import templates as T

MEEP_CITATION = """@inproceedings{ferron-etal-2023-meep,
  title     = {{MEEP}: Is this Engaging? Prompting Large Language Models for Dialogue Evaluation in Multilingual Settings},
  author    = {Ferron, Amila and Shore, Amber and Mitra, Ekata and Agrawal, Ameeta},
  booktitle = {Findings of the Association for Computational Linguistics: EMNLP 2023},
  pages     = {2078--2100},
  address   = {Singapore},
  publisher = {Association for Computational Linguistics},
  year      = {2023},
}"""

# DSTC11 Track 4 sets (MEEP §5.2), as configs of the generic common-schema builder: FED and
# Persona-SEE at turn level (en + es/zh machine translations), KdConv and LCCC at dialogue level
# (zh + en machine translations).
BUILDER = "common"
TURN_CONFIGS = ("fed-turn", "see-turn")
DIALOGUE_CONFIGS = ("kdconv-dial", "lccc-dial")
TURN_LANGUAGES = ("en", "es", "zh")
DIALOGUE_LANGUAGES = ("en", "zh")
DIMENSION = "engagingness"

# MEEP §5.1 sets no maximum generation length ("the responses are long and the location of scores
# within the returned text is unpredictable"). 256 tokens covers a score with a short explanation;
# raise it per judge with the spec option max_tokens=N (e.g. hf:<model>,max_tokens=1024).
WRITTEN_SCORE_GENERATION = GenerationConfig(temperature=0.0, top_p=1.0, max_tokens=256)
# GPTScore generates nothing: it scores the echoed continuation (Request.continuation).
GPTSCORE_GENERATION = GenerationConfig(temperature=0.0, top_p=1.0, max_tokens=1)

SCALE_0_100 = ParseScore(range=(0.0, 100.0), integer=False)
SCALE_1_3 = ParseScore(range=(1.0, 3.0), integer=True)


def _task(
    name: str,
    description: str,
    templates: dict,
    *,
    level: str = "turn",
    group: str,
    scorer: Scorer,
    generation: GenerationConfig = WRITTEN_SCORE_GENERATION,
    **extra,
) -> TaskSpec:
    turn = level == "turn"
    return register_task(
        TaskSpec(
            name=name,
            description=description,
            builder=BUILDER,
            configs=TURN_CONFIGS if turn else DIALOGUE_CONFIGS,
            level=level,
            dimension=DIMENSION,
            languages=TURN_LANGUAGES if turn else DIALOGUE_LANGUAGES,
            templates=templates,
            metrics=("spearman", "pearson"),
            generation=generation,
            group=group,
            evaluate_dir="tasks/meep",
            citation=MEEP_CITATION,
            embedding_method="context_response_cosine" if turn else "adjacent_turn_cosine",
            scorer=scorer,
            **extra,
        )
    )


def _same(tpl, languages=TURN_LANGUAGES) -> dict:
    """The English prompt for every language (MEEP §5: prompts in English on every dataset)."""
    return {lang: tpl for lang in languages}


# variant code -> task (the evaluate module's configs are the codes with "-" -> "_").
TASKS: dict[str, TaskSpec] = {}

for code, tpl, label, scale, table in [
    ("naive", T.NAIVE, "Naive", SCALE_0_100, 7),
    ("naive-r", T.NAIVE_R, "Naive+R", SCALE_0_100, 7),
    ("hd", T.HD, "HD (human-directed)", SCALE_1_3, 7),
    ("hd-r", T.HD_R, "HD+R", SCALE_1_3, 7),
    ("meep", T.MEEP, "MEEP", SCALE_0_100, 8),
    ("meep-r", T.MEEP_R, "MEEP+R", SCALE_0_100, 8),
    ("meep-sa", T.MEEP_SA, "MEEP+SA", SCALE_0_100, 8),
    ("meep-sa-r", T.MEEP_SA_R, "MEEP+SA+R", SCALE_0_100, 8),
]:
    lo, hi = scale.range
    TASKS[code] = _task(
        f"meep-{code}",
        f"MEEP {label} prompt (App. A Table {table}, English for every language): turn-level "
        f"engagingness score {lo:g}-{hi:g} parsed from the reply vs the human engagingness rating.",
        _same(tpl),
        group="meep",
        scorer=scale,
    )

for code, (es, zh, en), label in [
    ("meep-sa-native", (T.MEEP_SA_ES, T.MEEP_SA_ZH, T.MEEP_SA), "MEEP+SA†"),
    ("meep-sa-r-native", (T.MEEP_SA_R_ES, T.MEEP_SA_R_ZH, T.MEEP_SA_R), "MEEP+SA+R†"),
]:
    TASKS[code] = _task(
        f"meep-{code}",
        f"MEEP {label} (App. A Table 9): the prompt translated into the language of the dataset "
        "(Spanish / Chinese; English items keep the Table 8 prompt), turn-level engagingness 0-100.",
        {"en": en, "es": es, "zh": zh},
        group="meep",
        scorer=SCALE_0_100,
    )

TASKS["geval"] = _task(
    "meep-geval",
    "G-EVAL baseline as adapted by MEEP (App. A Table 11): turn-level engagingness 1-3 written by the "
    "judge after the evaluation form, parsed from the reply.",
    _same(T.GEVAL),
    group="meep-baselines",
    scorer=SCALE_1_3,
)
TASKS["gptscore"] = _task(
    "meep-gptscore",
    "GPTScore baseline as adapted by MEEP (App. A Table 11, §5.3): the log-prob of 'Yes' in the "
    "echoed continuation 'Answer: Yes.' after the prompt (needs the hf or vllm backend).",
    _same(T.GPTSCORE),
    group="meep-baselines",
    scorer=GPTScore(continuation=T.GPTSCORE_CONTINUATION, target=T.GPTSCORE_TARGET),
    generation=GPTSCORE_GENERATION,
)

for code, tpl, label, scale, group in [
    ("meep-sa-dial", T.MEEP_SA_DIAL, "MEEP+SA-DIAL", SCALE_0_100, "meep-dial"),
    ("meep-sa-r-dial", T.MEEP_SA_R_DIAL, "MEEP+SA+R-DIAL", SCALE_0_100, "meep-dial"),
    ("geval-dial", T.GEVAL_DIAL, "G-EVAL-DIAL", SCALE_1_3, "meep-baselines"),
]:
    lo, hi = scale.range
    TASKS[code] = _task(
        f"meep-{code}",
        f"{label} prompt (App. A Table 10, English for every language): dialogue-level engagingness "
        f"{lo:g}-{hi:g} parsed from the reply vs the human engagingness rating.",
        _same(tpl, DIALOGUE_LANGUAGES),
        level="dialogue",
        group=group,
        scorer=scale,
    )

#: evaluate-module config name -> task
CONFIGS: dict[str, TaskSpec] = {code.replace("-", "_"): spec for code, spec in TASKS.items()}

__all__ = ["CONFIGS", "MEEP_CITATION", "TASKS"]
