"""The published numbers ``harness reproduce upheld`` compares against (UPHELD, Subasic et al.
2026, App. B Tables 7–9 and App. J Table 10), transcribed from ../shared/seeds/004_*.txt.

Tables 7 and 8 give mean ± std over the 5 held-out folds; Table 9 gives point values only.
Column keys are our dataset config names (``main`` = UPHELD, ``llm_arena``, ``topical_chat``).
"""

from __future__ import annotations

SEMANTIC = ("message_embedding_cos_sim", "bert_score_precision", "bert_score_recall", "bert_score_F1")
TOKEN = ("rouge1", "rouge2", "rougeL", "rougeLsum")
LLM_JUDGE = (
    "llm_judge_yes_no",
    "llm_judge_yes_no_explain",
    "llm_judge_likert_1_5",
    "llm_judge_likert_1_5_explain",
)
ENSEMBLES = ("linear_regression", "svm", "random_forest")
ENSEMBLE_LABELS = {"linear_regression": "Linear Regression", "svm": "SVM", "random_forest": "Random Forest"}
CONFIGS = ("main", "llm_arena", "topical_chat")
CONFIG_LABELS = {"main": "UPHELD", "llm_arena": "LLM Arena", "topical_chat": "Topical-Chat"}

Cell = tuple[float, float | None]


def _rows(text: str) -> dict[str, dict[str, Cell]]:
    out: dict[str, dict[str, Cell]] = {}
    for line in text.strip().splitlines():
        name, *cells = line.split()
        vals: dict[str, Cell] = {}
        for cfg, cell in zip(CONFIGS, cells, strict=True):
            v, _, s = cell.partition("±")
            vals[cfg] = (float(v), float(s) if s else None)
        out[name] = vals
    return out


# Table 7 (content accuracy)
TABLE_7 = _rows("""
message_embedding_cos_sim 0.58±0.003 0.41±0.004 0.40±0.008
bert_score_precision 0.36±0.005 0.39±0.004 0.32±0.008
bert_score_recall 0.40±0.005 0.42±0.004 0.40±0.008
bert_score_F1 0.40±0.005 0.45±0.003 0.42±0.008
rouge1 0.34±0.005 0.49±0.003 0.33±0.009
rouge2 0.24±0.005 0.43±0.003 0.24±0.009
rougeL 0.32±0.005 0.41±0.004 0.34±0.010
rougeLsum 0.31±0.005 0.50±0.003 0.34±0.009
llm_judge_yes_no 0.40±0.012 0.32±0.015 0.57±0.016
llm_judge_yes_no_explain 0.23±0.018 0.32±0.014 0.29±0.013
llm_judge_likert_1_5 0.26±0.008 0.41±0.011 0.39±0.014
llm_judge_likert_1_5_explain 0.28±0.009 0.41±0.013 0.34±0.013
linear_regression 0.59±0.004 0.50±0.003 0.58±0.006
svm 0.55±0.005 0.49±0.003 0.54±0.008
random_forest 0.63±0.004 0.23±0.004 0.32±0.009
""")

# Table 8 (style accuracy)
TABLE_8 = _rows("""
message_embedding_cos_sim 0.41±0.001 0.42±0.004 0.29±0.009
bert_score_precision 0.37±0.005 0.39±0.004 0.36±0.008
bert_score_recall 0.36±0.005 0.50±0.004 0.27±0.009
bert_score_F1 0.41±0.005 0.49±0.003 0.35±0.008
rouge1 0.32±0.005 0.51±0.003 0.31±0.010
rouge2 0.20±0.005 0.43±0.004 0.16±0.010
rougeL 0.29±0.005 0.48±0.004 0.30±0.009
rougeLsum 0.29±0.005 0.48±0.003 0.30±0.009
llm_judge_yes_no 0.35±0.012 0.08±0.010 0.36±0.016
llm_judge_yes_no_explain 0.15±0.015 0.08±0.010 0.24±0.013
llm_judge_likert_1_5 0.24±0.010 0.07±0.009 0.22±0.014
llm_judge_likert_1_5_explain 0.20±0.012 0.05±0.008 0.20±0.013
linear_regression 0.50±0.004 0.28±0.004 0.32±0.008
svm 0.49±0.005 0.54±0.003 0.55±0.009
random_forest 0.61±0.004 0.04±0.004 0.22±0.009
""")

# Table 9 (reasonableness; point values)
TABLE_9 = _rows("""
message_embedding_cos_sim 0.01 0.28 0.01
bert_score_precision 0.17 0.15 0.13
bert_score_recall 0.07 0.15 0.04
bert_score_F1 0.14 0.19 0.10
llm_judge_yes_no 0.13 0.16 0.09
llm_judge_yes_no_explain 0.06 0.16 0.00
llm_judge_likert_1_5 0.03 0.26 0.00
llm_judge_likert_1_5_explain 0.00 0.26 0.00
rouge1 0.12 0.31 0.06
rouge2 0.11 0.24 0.04
rougeL 0.12 0.18 0.07
rougeLsum 0.11 0.28 0.06
linear_regression 0.16 -0.16 0.01
svm 0.01 0.20 0.03
random_forest 0.52 0.18 0.04
""")

TABLES = {
    "content": ("Table 7", TABLE_7),
    "style": ("Table 8", TABLE_8),
    "reasonableness": ("Table 9", TABLE_9),
}

# Table 10 (App. J): accuracy against the winning human label per agreement level, UPHELD main.
# metric -> dimension -> {all, plurality, majority, full}
TABLE_10 = {
    "random_forest": {"content": (0.59, 0.84, 0.79, 0.90), "style": (0.52, 0.74, 0.76, 0.88)},
    "linear_regression": {"content": (0.47, 0.71, 0.73, 0.77), "style": (0.28, 0.58, 0.64, 0.66)},
    "svm": {"content": (0.35, 0.56, 0.69, 0.89), "style": (0.14, 0.49, 0.56, 0.67)},
    "llm_judge_likert_1_5": {"content": (0.21, 0.33, 0.37, 0.45), "style": (0.12, 0.33, 0.41, 0.46)},
    "llm_judge_yes_no": {"content": (0.33, 0.53, 0.59, 0.83), "style": (0.16, 0.41, 0.50, 0.54)},
    "rougeL": {"content": (0.33, 0.56, 0.59, 0.68), "style": (0.24, 0.49, 0.57, 0.65)},
    "bert_score_F1": {"content": (0.33, 0.59, 0.64, 0.65), "style": (0.25, 0.55, 0.63, 0.66)},
}
BUCKET_ORDER = ("all", "plurality", "majority", "full")

# The paper's calibration baselines (§3.2): a GPT-4o rephrase of the reference and a random turn.
BASELINE_SYSTEMS = ("gpt4_rephrase", "random")
