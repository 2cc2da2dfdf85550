"""MEEP prompt family as data (Ferron et al., 2023, App. A Tables 7-11).

Wording is verbatim from the tables (typographic quotes included). Layout: the tables print each
prompt as paragraphs; the instruction paragraph comes first and the "Dialogue context: / Response: /
Score:" parts follow on their own lines, separated by blank lines because the context itself spans
several lines (one context turn per line). G-EVAL keeps one line per criterion and step, as in the
G-Eval prompt it adapts.

Placeholders (see :meth:`harness.tasks.TaskSpec.fields`):

* turn level: the paper's ``<dialogue>`` (the dialogue context) -> ``{context}`` (context turns
  joined by newlines), ``<response>`` -> ``{response}``; GPTScore's ``<conversation>`` ->
  ``{context}`` as well;
* dialogue level: ``<dialogue>`` -> ``{conversation}`` (one ``"role: text"`` line per turn).

Role assignment ("+R", Table 9) is the template's ``system`` message; backends whose chat template
cannot carry a system message prefix it to the user message (MEEP §4).
"""

from harness.tasks import PromptTemplate

SOURCE = "MEEP (Ferron et al., 2023) App. A Table {n}"

# -- role assignment (Table 9, +R / ES(+R) / ZH(+R)) ----------------------------------------------
ROLE = {
    "en": "You are an expert evaluator of dialogue.",
    "es": "Eres experto en evaluación de diálogos.",
    "zh": "你是一名对话评估的专家。",
}

# -- English turn-level instructions (Tables 7-8) ------------------------------------------------
_SCALE_0_100 = (
    "Score the following response given the corresponding dialogue context on a continuous scale "
    "from 0 to 100, where a score of zero means ‘disengaging’ and a score of 100 means ‘very "
    "engaging’. Assume the response immediately follows the dialogue context."
)
NAIVE_INSTRUCTION = _SCALE_0_100

HD_INSTRUCTION = (
    "You will be given a conversation between two individuals. You will then be given several "
    "potential responses for the next turn in the conversation. Is the response engaging?\n\n"
    "A response is considered engaging if it can engage the user. This might be an inquisitive "
    "question or an interesting response that can be followed-up on.\n\n"
    "A score of 1 means No: the response is boring and does little to engage the user.\n"
    "· Hi there.\n"
    "· Oh wow! That’s cool!\n\n"
    "A score of 2 means Somewhat: the response is not particularly engaging but still leaves room "
    "for follow-up.\n"
    "· My favourite colour is blue.\n"
    "· Nope. I’m not very good with cooking.\n\n"
    "A score of 3 means Yes: the response is actively engaging the user and trying to move forward "
    "the conversation.\n"
    "· I have a feeling that if you can dodge a wrench you can dodge a ball.\n"
    "· What kind of shows do you like?"
)

MEEP_INSTRUCTION = (
    _SCALE_0_100 + " Consider that engagingness of a response is defined by the following qualities: "
    "variety of response according to the context, likelihood of encouraging the other participant "
    "to respond, likelihood of encouraging a quality response from the other participant, "
    "interestingness, specificity, and likelihood of creating a sense of belonging for the other "
    "participant."
)

MEEP_SA_INSTRUCTION = (
    _SCALE_0_100 + " Consider that engagingness of a response is defined by the following qualities: "
    "variety of response according to the context (such as responding to ‘Hi how are you?’ with "
    "‘I feel magnificent, because I just successfully defended my PhD! How are you?’ instead of "
    "‘Good, how are you?’), likelihood of encouraging the other participant to respond (such as "
    "‘I love legos! I like using them to make funny things. Do you like legos?’ instead of ‘I like "
    "legos.’), likelihood of encouraging a quality response from the other participant, "
    "interestingness, specificity, and likelihood of creating a sense of belonging for the other "
    "participant."
)

# -- translated MEEP+SA (Table 9) ----------------------------------------------------------------
MEEP_SA_INSTRUCTION_ES = (
    "Evalúa la siguiente respuesta dada el contexto de diálogo correspondiente en una escala continua "
    "del 0 al 100, donde una puntuación de cero significa “desinteresante” y una puntuación de 100 "
    "significa “muy interesante”. Supongamos que la respuesta sigue inmediatamente después del "
    "contexto de diálogo. Considera que la cualidad de una respuesta interesante se define por las "
    "siguientes características: variedad de respuesta de acuerdo al contexto (por ejemplo, "
    "responder a “Hola, ¿cómo estás?” con “Me siento magnífico porque acabo de defender exitosamente "
    "mi tesis doctoral. ¿Y tú?” en lugar de “Bien, ¿y tú?”), probabilidad de incentivar al otro "
    "participante a responder (por ejemplo, “¡Me encantan los legos! Me gusta usarlos para hacer "
    "cosas divertidas. ¿Te gustan los legos?” en lugar de “Me gustan los legos.”), probabilidad de "
    "incentivar una respuesta de calidad del otro participante, interés, especificidad y "
    "probabilidad de crear un sentido de pertenencia para el otro participante."
)

MEEP_SA_INSTRUCTION_ZH = (
    "根据相应的对话背景，对以下回应在0到100的连续刻度上进行评分，其中0分表示“不吸引人”，100分表示“非常吸引人”。"
    "假设回应紧随对话背景之后。请考虑回应的吸引力是由以下特质定义的：根据背景的回应的多样性（例如对“你好，"
    "你怎么样？”的回应是“我感觉很棒，因为我刚成功地为我的博士学位进行了答辩！你怎么样？”而不是“好的，你怎么样？”）、"
    "鼓励其他参与者回应的可能性（例如：“我喜欢乐高！我喜欢用它们制作有趣的东西。你喜欢乐高吗？”而不是“我喜欢乐高。”）、"
    "鼓励其他参与者提供高质量回应的可能性、有趣性、具体性和为其他参与者创造归属感的可能性。"
)

# -- dialogue level (Table 10) -------------------------------------------------------------------
MEEP_SA_DIAL_INSTRUCTION = (
    "In this task, you will be shown part of a dialogue. Score the dialogue on a continuous scale "
    "from 0 to 100, where a score of zero means ‘disengaging’ and a score of 100 means ‘very "
    "engaging’. Consider that engagingness of each dialogue is defined by the following qualities: "
    "variety of responses according to the context (such as responding to ‘Hi how are you?’ with "
    "‘I feel magnificent, because I just successfully defended my PhD! How are you?’ instead of "
    "‘Good, how are you?’), likelihood of encouraging the other participant to respond (such as "
    "‘I love legos! I like using them to make funny things. Do you like legos?’ instead of ‘I like "
    "legos.’), likelihood of encouraging quality responses from the other participant, "
    "interestingness, specificity, and likelihood of creating a sense of belonging for the other "
    "participant. Consider the overall engagingness of the conversation."
)

GEVAL_DIAL_INSTRUCTION = (
    "You will be given a conversation between two individuals. Your task is to rate the conversation "
    "on one metric.\n"
    "Please make sure you read and understand these instructions carefully. Please keep this document "
    "open while reviewing, and refer to it as needed.\n\n"
    "Evaluation Criteria:\n"
    "Engagingness (1-3) Is the conversation dull/interesting?\n"
    "- A score of 1 (dull) means that the conversation is generic and dull.\n"
    "- A score of 2 (somewhat interesting) means the conversation is somewhat interesting and could "
    "engage you in the conversation (e.g., an opinion, thought)\n"
    "- A score of 3 (interesting) means the conversation is very interesting or presents an "
    "interesting fact\n\n"
    "Evaluation Steps:\n"
    "1. Read the conversation carefully.\n"
    "2. Rate the conversation on a scale of 1-3 for engagingness, according to the criteria above.\n"
    "3. Provide a brief explanation for your rating, referring to specific aspects of the conversation."
)

# -- baselines (Table 11) ------------------------------------------------------------------------
GEVAL_INSTRUCTION = (
    "You will be given a conversation between two individuals. You will then be given one potential "
    "response for the next turn in the conversation.\n"
    "Your task is to rate the responses on one metric.\n"
    "Please make sure you read and understand these instructions carefully. Please keep this document "
    "open while reviewing, and refer to it as needed.\n\n"
    "Evaluation Criteria:\n"
    "Engagingness (1-3) Is the response dull/interesting?\n"
    "- A score of 1 (dull) means that the response is generic and dull.\n"
    "- A score of 2 (somewhat interesting) means the response is somewhat interesting and could engage "
    "you in the conversation (e.g., an opinion, thought)\n"
    "- A score of 3 (interesting) means the response is very interesting or presents an interesting fact\n\n"
    "Evaluation Steps:\n"
    # Verbatim from Table 11: the step still names "the corresponding fact" although MEEP's
    # adaptation drops the fact input.
    "1. Read the conversation, the corresponding fact and the response carefully.\n"
    "2. Rate the response on a scale of 1-3 for engagingness, according to the criteria above.\n"
    "3. Provide a brief explanation for your rating, referring to specific aspects of the response "
    "and the conversation."
)

GPTSCORE_INSTRUCTION = (
    "Answer the question based on the conversation between a human and AI.\n"
    "Question: Are the responses of AI engaging? (a) Yes. (b) No."
)
# Table 11 ends the GPTScore prompt with "Answer: Yes.": it is not part of the user text but the
# continuation the backend echoes after the rendered prompt (TaskSpec.continuation), and the
# log-prob of its "Yes" is the score.
GPTSCORE_CONTINUATION = "Answer: Yes."
GPTSCORE_TARGET = "Yes"


def _turn_parts(context: str, response: str, score: str) -> str:
    # Table 7 prints "Response: <dialogue>" for Naive and HD, an obvious typo for <response>
    # (Table 8 has "Response: <response>"): every turn-level prompt fills the response here.
    return f"\n\n{context} {{context}}\n\n{response} {{response}}\n\n{score}"


_EN_PARTS = _turn_parts("Dialogue context:", "Response:", "Score:")
_ES_PARTS = _turn_parts("Contexto de diálogo:", "Respuesta:", "Puntuación:")
_ZH_PARTS = _turn_parts("对话背景:", "回应:", "评分:")


def _tpl(name: str, table: int, user: str, language: str = "en", role: bool = False) -> PromptTemplate:
    return PromptTemplate(
        name=name,
        user=user,
        source=SOURCE.format(n=table),
        language=language,
        version="1",
        system=ROLE[language] if role else None,
    )


# -- turn level ----------------------------------------------------------------------------------
NAIVE = _tpl("meep-naive", 7, NAIVE_INSTRUCTION + _EN_PARTS)
NAIVE_R = _tpl("meep-naive+r", 7, NAIVE_INSTRUCTION + _EN_PARTS, role=True)
HD = _tpl("meep-hd", 7, HD_INSTRUCTION + _EN_PARTS)
HD_R = _tpl("meep-hd+r", 7, HD_INSTRUCTION + _EN_PARTS, role=True)
MEEP = _tpl("meep-meep", 8, MEEP_INSTRUCTION + _EN_PARTS)
MEEP_R = _tpl("meep-meep+r", 8, MEEP_INSTRUCTION + _EN_PARTS, role=True)
MEEP_SA = _tpl("meep-meep+sa", 8, MEEP_SA_INSTRUCTION + _EN_PARTS)
MEEP_SA_R = _tpl("meep-meep+sa+r", 8, MEEP_SA_INSTRUCTION + _EN_PARTS, role=True)
# † variants: the prompt translated into the language of the dataset (Table 9).
MEEP_SA_ES = _tpl("meep-meep+sa-es", 9, MEEP_SA_INSTRUCTION_ES + _ES_PARTS, "es")
MEEP_SA_R_ES = _tpl("meep-meep+sa+r-es", 9, MEEP_SA_INSTRUCTION_ES + _ES_PARTS, "es", role=True)
MEEP_SA_ZH = _tpl("meep-meep+sa-zh", 9, MEEP_SA_INSTRUCTION_ZH + _ZH_PARTS, "zh")
MEEP_SA_R_ZH = _tpl("meep-meep+sa+r-zh", 9, MEEP_SA_INSTRUCTION_ZH + _ZH_PARTS, "zh", role=True)

GEVAL = _tpl(
    "meep-g-eval",
    11,
    GEVAL_INSTRUCTION + "\n\nExample:\n\nConversation History: {context}\n\nResponse: {response}\n\n"
    "Evaluation Form (scores ONLY):\n- Engagingness:",
)
# The user text ends right before the echoed "Answer: Yes." (GPTSCORE_CONTINUATION), line break
# included, so a plain (template-free) rendering reads exactly as Table 11.
GPTSCORE = _tpl(
    "meep-gptscore", 11, GPTSCORE_INSTRUCTION + "\nDialogue context: {context}\nResponse: {response}\n"
)

# -- dialogue level ------------------------------------------------------------------------------
# Table 10 ends MEEP+SA-DIAL with "Score: <score>": <score> is where the model writes, so the
# prompt ends with "Score:".
MEEP_SA_DIAL = _tpl(
    "meep-meep+sa-dial", 10, MEEP_SA_DIAL_INSTRUCTION + "\n\nDialogue: {conversation}\n\nScore:"
)
MEEP_SA_R_DIAL = _tpl(
    "meep-meep+sa+r-dial", 10, MEEP_SA_DIAL_INSTRUCTION + "\n\nDialogue: {conversation}\n\nScore:", role=True
)
GEVAL_DIAL = _tpl(
    "meep-g-eval-dial",
    10,
    GEVAL_DIAL_INSTRUCTION
    + "\n\nExample:\n\nConversation: {conversation}\n\nEvaluation Form (scores ONLY):\n- Engagingness:",
)

ALL_TEMPLATES = (
    NAIVE,
    NAIVE_R,
    HD,
    HD_R,
    MEEP,
    MEEP_R,
    MEEP_SA,
    MEEP_SA_R,
    MEEP_SA_ES,
    MEEP_SA_R_ES,
    MEEP_SA_ZH,
    MEEP_SA_R_ZH,
    GEVAL,
    GPTSCORE,
    MEEP_SA_DIAL,
    MEEP_SA_R_DIAL,
    GEVAL_DIAL,
)
