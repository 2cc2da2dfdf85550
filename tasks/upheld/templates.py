"""UPHELD App. H LLM-as-a-judge prompts (Table 7/8 rows ``llm_judge_*``), verbatim.

The paper writes its placeholders as ``{chat_history}``/``{conversation}``, ``{Option A}``/
``{reference}`` and ``{Option B}``/``{prediction}``; here they are ``{conversation}`` (the context
as ``role: text`` lines, the form of the release's ``chat_history`` column), ``{reference}``
(Option A, the human continuation) and ``{response}`` (Option B, the model continuation). The
wording — including the paper's typos ("the on a", and the yes/no+explain prompt asking whether
the continuation "seems natural and human generated") — is kept as published, since changing it
would change the metric.
"""

from harness.scorers import ParseLikert, ParseYesNo
from harness.tasks import PromptTemplate

SOURCE = "UPHELD (2025) App. H, LLM-as-a-judge prompts"

YES_NO = PromptTemplate(
    name="upheld-llm-judge-yes-no",
    source=SOURCE + " (llm judge - yes/no)",
    user=(
        "Conversation: {conversation}\n\n"
        "Continuation: {reference}\n\n"
        "Prediction: {response}\n\n"
        "For the above your job is to compare the continuation and reference response as being equivalent in "
        'regards to the conversation. Output "Yes" if you think the continuation contains the same information '
        'as reference, otherwise output "No".'
    ),
)

YES_NO_EXPLAIN = PromptTemplate(
    name="upheld-llm-judge-yes-no-explain",
    source=SOURCE + " (llm judge - yes/no explain)",
    user=(
        "Conversation: {conversation}\n\n"
        "Continuation: {reference}\n\n"
        "Prediction: {response}\n\n"
        "For the above your job is to compare the continuation and reference response as being equivalent in "
        'regards to the conversation. Output "Yes" if you think the continuation seems natural and human '
        'generated, otherwise output "No". Also output the explanation of why you made the judgment.'
    ),
)

LIKERT = PromptTemplate(
    name="upheld-llm-judge-likert-1-5",
    source=SOURCE + " (llm judge - likert 1-5)",
    user=(
        "Conversation: {conversation}\n\n"
        "Reference: {reference}\n\n"
        "Prediction: {response}\n\n"
        "For the above your job is to compare the prediction and reference responses. Score whether the "
        "prediction conveys the same information as the reference the on a likert scale of 1 to 5. 1 means none "
        "of the reference information is conveyed by the prediction; and 5 means reference and prediction are "
        "semantically equivalent. Output only scores from 1 to 5 (integer)"
    ),
)

LIKERT_EXPLAIN = PromptTemplate(
    name="upheld-llm-judge-likert-1-5-explain",
    source=SOURCE + " (llm judge - likert 1-5 explain)",
    user=(
        "Conversation: {conversation}\n\n"
        "Reference: {reference}\n\n"
        "Prediction: {response}\n\n"
        "For the above your job is to compare the prediction and reference responses.\n\n"
        "Score whether the prediction conveys the same response as the reference the on a score of 1 to 5 and "
        "give a reason as to why."
    ),
)

# feature name (the paper's row) -> (template, scoring method, generation budget)
JUDGE_PROMPTS = {
    "llm_judge_yes_no": (YES_NO, ParseYesNo(), 16),
    "llm_judge_yes_no_explain": (YES_NO_EXPLAIN, ParseYesNo(), 256),
    "llm_judge_likert_1_5": (LIKERT, ParseLikert(range=(1, 5)), 16),
    "llm_judge_likert_1_5_explain": (LIKERT_EXPLAIN, ParseLikert(range=(1, 5)), 256),
}
