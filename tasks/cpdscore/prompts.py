"""CPDScore prompt templates (ComperDial, Wakaki et al. 2024, Appendix B), kept as data.

The text is copied verbatim from the paper's Appendix B. What the PDF rendering leaves open, and
what this file chose (also listed in ``NOTES``):

* Line layout: the PDF shows every line as its own paragraph; the prompts here put one blank line
  between sections and none inside a section, the layout of the code-block prompt in B.1.1.
* Headings: B.2/B.3 render as ``### ### Instructions:`` (a Markdown heading whose text is
  ``### Instructions:``); the prompt text is ``### Instructions:``, as in the B.1 prompts.
* Placeholders ``[Here is history information ]`` etc. become ``{history}``, ``{reference}``,
  ``{fact}``, ``{response}``. B.3's ``Turn<sub>1</sub> Score - [score<sub>1</sub> ]`` and
  ``Turn<sub>1</sub>: [turn<sub>1</sub> ]`` lines become ``Turn 1 Score - 4.33`` and
  ``Turn 1: <response>``, one per turn of the dialogue; the ``(Continue next page)`` page-break
  note of B.3 is dropped. B.3's own inconsistencies ("seven turns", "Overall Dialogue Score" vs
  "Overall Dialogue Turn Score", "Dialogue Interaction Evaluation Score") are kept as printed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

PAPER = "ComperDial (Wakaki et al., 2024), Appendix B"


@dataclass(frozen=True)
class PromptTemplate:
    """One prompt: ``template`` is a ``str.format`` string with named fields."""

    name: str
    source: str
    template: str
    fields: tuple[str, ...]
    score_key: str  # the line of the evaluation form that holds the score this prompt asks for
    version: str = "1"
    # Extra per-line formats that are part of the prompt (B.3's turn-score / response lines).
    line_formats: tuple[str, ...] = ()

    @property
    def sha256(self) -> str:
        blob = "\x00".join((self.name, self.version, self.template, *self.line_formats))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def render(self, **values: str) -> str:
        missing = set(self.fields) - set(values)
        if missing:
            raise KeyError(f"prompt {self.name!r} needs field(s) {sorted(missing)}")
        return self.template.format(**{k: values[k] for k in self.fields})

    def info(self) -> dict[str, str]:
        return {"name": self.name, "source": self.source, "version": self.version, "sha256": self.sha256}


_SIMPLE_INSTRUCTION = """### Instruction:
Rate the humanness, fluency, coherency, consistency, engagingness, and overall quality of the response of the context on a scale of 1 to 5 and output the corresponding evaluation results.

### Output Format:
humanness - x
fluency - x
coherency - x
consistency - x
engagingness - x
overall - x

### Your Response:"""

SIMPLE_WITH_REF = PromptTemplate(
    name="cpds-simple-ref",
    source=f"{PAPER}.1.2 'CPDScore-Simple with reference'",
    template="### Context:\n{history}\n\n### Reference response:\n{reference}\n\n### Response:\n{response}\n\n"
    + _SIMPLE_INSTRUCTION,
    fields=("history", "reference", "response"),
    score_key="overall",
)

SIMPLE_NO_REF = PromptTemplate(
    name="cpds-simple-noref",
    source=f"{PAPER}.1.3 'CPDScore-Simple without reference'",
    template="### Context:\n{history}\n\n### Response:\n{response}\n\n" + _SIMPLE_INSTRUCTION,
    fields=("history", "response"),
    score_key="overall",
)


def _detail_head(task_line: str, read_line: str) -> str:
    return f"""### Instructions:
You will be given a conversation between two individuals.
You will then be given one possible response for the next turn of the conversation.
{task_line}
Please make sure you read and understand these instructions carefully.
Please keep this document open while reviewing, and refer to it as needed.

### Evaluation Criteria:
Humanness (1-5) Is the response human-like or not?
- A score of 1 (very bad) means that the response is incoherent and the conversation does not make sense.
- A score of 2 (relatively bad) means that the response makes sense as a conversation, but there are many bad points.
- A score of 3 (neither) means that the response is neither good nor bad.
- A score of 4 (fair enough) means that the response feels a little human-like.
- A score of 5 (very good) means the response feels like you are talking to an actual human.

### Evaluation Steps:
{read_line}
2. Rate the response on a scale of 1-5 for humanness, according to the criteria above.
3. Provide a brief explanation for your rating, referring to specific aspects of the response and the conversation.

### Conversation History:
{{history}}

"""


_DETAIL_TAIL = """### Corresponding Fact:
{fact}

### Response:
{response}

### Evaluation Form (scores ONLY):
- Humanness:"""

# B.2.2 and B.2.3 differ in more than the reference section: "rate the response" vs "rate the
# possible response", and step 1 names the reference response. Both kept as printed.
DETAIL_WITH_REF = PromptTemplate(
    name="cpds-detail-ref",
    source=f"{PAPER}.2.2 'CPDScore-Detail with reference'",
    template=_detail_head(
        "Your task is to rate the response based on one metric.",
        "1. Read the conversation, the corresponding reference response, the corresponding fact and the response carefully.",
    )
    + "### Corresponding Reference Response:\n{reference}\n\n"
    + _DETAIL_TAIL,
    fields=("history", "reference", "fact", "response"),
    score_key="humanness",
)

DETAIL_NO_REF = PromptTemplate(
    name="cpds-detail-noref",
    source=f"{PAPER}.2.3 'CPDScore-Detail without reference'",
    template=_detail_head(
        "Your task is to rate the possible response based on one metric.",
        "1. Read the conversation, the corresponding fact and the response carefully.",
    )
    + _DETAIL_TAIL,
    fields=("history", "fact", "response"),
    score_key="humanness",
)

DIALOGUE = PromptTemplate(
    name="cpds-dialogue",
    source=f"{PAPER}.3 'CPDScore-Dialogue' (step 2)",
    template="""### Instructions:
Your task is to make an overall evaluation of multiple responses from a dialogue model by checking if the response is human-like or not. You are to make 2 evaluations before giving a final evaluation as the "Final Score." There will be seven turns from a dialogue. Each turn in the dialogue has already been rated on a scale of 1-5 and have been given a "Dialogue Turn Score." Please follow the "Evaluation Steps" step by step and output the "Final score" at the end. Please make sure you read and understand these instructions carefully. Please keep this document open while reviewing, and refer to it as needed. The output should follow the Evaluation Form. No reason output is required. Your output should follow the "Evaluation Form."

### Evaluation Steps:
1. Review the "Dialogue Turn Scores" to see the ratings for each turn.
2. Evaluate the dialogue as a whole based on the scores of each turn, and give an "Overall Dialogue Turn Score."
3. Review the multiple responses from the dialogue shown in "Responses" and read the "Dialogue Interaction Evaluation Criteria."
4. Evaluate the multiple responses in "Responses" and give a "Dialogue Interaction Score" based on the "Dialogue Interaction Evaluation Criteria."
5. Finally, give a "Final Score" with a score between 1-5, based on the below conditions. If the "Overall Dialogue Score" is less than 4: you are to take into account both the scores you have given as the "Overall Dialogue Turn Score" and the "Dialogue Interaction Score" to determine the "Final Score." If the "Overall Dialogue Score" is higher than 4: you are to disregard the "Dialogue Interaction Score" and only look at the "Overall Dialogue Score" to determine the "Final Score." There is one exception. If the "Overall Dialogue Score" is 4 or higher but the "Dialogue Interaction Score" was given a low score due to the inordinate length of the response, you are to take into account both the scores you have given as the "Overall Dialogue Turn Score" and the "Dialogue Interaction Score" to determine the "Final Score."
6. The output should include 3 scores, the "Overall Dialogue Turn Score," the "Dialogue Interaction Score," and the "Final Score."

### Dialogue Turn Scores:
{turn_scores}

### Dialogue Interaction Evaluation Criteria:
Check all turns in the "Responses" to see if there are any features that are non human-like. The "Dialogue Interaction Score" should be low if it includes features such as, distinctly impersonal (i.e., the response has excessive explanations or is inordinately long), or has dull conversation features (i.e., sounds superficial, always responding in a patterned way). You are also to check the number of words in each turn. If a response consists of more than twenty words, please consider the response is too long. Please evaluate responses as a whole and give a score between 1-5 as the "Dialogue Interaction Evaluation Score." You may use decimal points in your scores, if necessary, such as a score of 3.5. The approximate criteria are as follows.
score 1 : Very bad : all responses have similar patterns and/or some of the responses are too long
score 2 : Relatively bad
score 3 : Neither bad nor good
score 4 : Fair enough
score 5 : Very good : When comparing the multiple turns, the sentences vary in length and semantic content, and uses a wide variety of vocabulary

### Responses:
{responses}

### Evaluation Form:
Overall Dialogue Turn Score - x
Dialogue Interaction Score - x
Final Score - x""",
    fields=("turn_scores", "responses"),
    score_key="final score",
    line_formats=("Turn {i} Score - {score}", "Turn {i}: {response}"),
)
# Keys (regex fragments, case-insensitive) of the three step-2 scores on B.3's Evaluation Form.
DIALOGUE_KEYS = {
    # B.3 step 5 also calls it "Overall Dialogue Score"; accept both.
    "intermediate": "overall dialogue (?:turn )?score",
    "interaction": "dialogue interaction score",
    "final": "final score",
}

TURN_PROMPTS: dict[tuple[str, bool], PromptTemplate] = {
    ("simple", True): SIMPLE_WITH_REF,
    ("simple", False): SIMPLE_NO_REF,
    ("detail", True): DETAIL_WITH_REF,
    ("detail", False): DETAIL_NO_REF,
}
ALL_PROMPTS = {p.name: p for p in (*TURN_PROMPTS.values(), DIALOGUE)}

NOTES = (
    "Line layout, '### ' headings and placeholders reconstructed from the PDF rendering (module docstring).",
    "Conversation history: one utterance per line, 'Person A: ' for the user and 'Person B: ' for the "
    "assistant (the target system is Person B in the annotation guidelines, App. A.7.2).",
    "'Corresponding Fact' (B.2.2/B.2.3) is not defined for ComperDial: filled from the record's 'fact', "
    "else its 'persona', else 'None'.",
    "B.3 turn scores are the step-1 mean over calls, written with up to 2 decimals; a turn with no "
    "parsed step-1 score is written 'N/A'.",
)
