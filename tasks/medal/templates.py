"""MEDAL's dialogue-evaluation prompt (Mendonça, Lavie and Trancoso, Table 11) as a prompt template.

The system prompt is the guideline the human annotators were given (§5.3.1), as printed in
Table 11 (the paper's version, "edited for brevity"; the unedited prompt is in the authors'
codebase, which is not available offline); only the PDF's broken bold markers were repaired. The
annotation sheets of the MEDAL pipeline print the same text, so it lives below both, in
:data:`dataset_builders.medal_labels.MEDAL_SYSTEM` (re-exported here). The user prompt is the
dialogue, one ``user: …`` / ``assistant: …`` line per turn.
"""

from dataset_builders.medal_labels import MEDAL_SYSTEM
from harness.tasks import PromptTemplate

__all__ = ["MEDAL_DIALOGUE_EVALUATION", "MEDAL_SYSTEM"]

MEDAL_DIALOGUE_EVALUATION = PromptTemplate(
    name="medal-dialogue-evaluation",
    system=MEDAL_SYSTEM,
    user="{conversation}",
    source="MEDAL (Mendonça, Lavie and Trancoso) Table 11, dialogue evaluation prompt",
    language="en",
    version="1",
)
