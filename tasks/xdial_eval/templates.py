"""xDial-Eval instruction templates (Zhang et al., 2023, Table 3: Alpaca-7B instruction template).

The user message carries the instruction and input exactly as in Table 3; the judge's chat
template supplies the assistant turn (with ``chat_template=alpaca`` the rendered prompt is the
paper's Alpaca prompt, ending in "### Response:\\n"). As in the authors' released scripts, the
English instruction is used for every language; the dialogue data itself is in the target language.
"""

from harness.tasks import PromptTemplate

SOURCE = "xDial-Eval (Zhang et al., EMNLP Findings 2023), Table 3"

TURN_RELEVANCE = PromptTemplate(
    name="xdial-turn-relevance",
    source=SOURCE + " (b) turn-level",
    language="en",
    version="1",
    user=(
        "### Instruction:\n"
        "Given the following dialogue context and response, predict whether the response is relevant to the context.\n\n"
        "### Input:\n"
        "Dialogue Context:\n{context}\n\n"
        "Dialogue Response:\n{response}"
    ),
)

DIALOGUE_COHERENCE = PromptTemplate(
    name="xdial-dialogue-coherence",
    source=SOURCE + " (a) dialogue-level",
    language="en",
    version="1",
    user=(
        "### Instruction:\n"
        "Given the input dialogue between a human ([H]) and a chatbot ([C]) below, "
        "predict whether the dialogue is coherent?\n\n"
        "### Input:\n"
        "{dialogue}"
    ),
)
