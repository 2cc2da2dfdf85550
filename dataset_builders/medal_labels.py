"""MEDAL's label set (Mendonça, Lavie and Trancoso: Table 1 and the Table 11 prompt), in one place.

The JSON keys of the Table 11 dialogue-evaluation prompt are the dimension names everywhere in
the harness (dataset labels, judge verdicts, meta-metrics, reports):

* eight binary issue labels (1 = the issue appears in some assistant turn), in Table 1's order;
* ``other`` — judged (Table 11 item 9) but not annotated by humans, so never meta-evaluated;
* ``overall`` — overall quality of the assistant on a 1–5 scale (JSON key
  ``overall_quality_rating``).

:data:`MEDAL_SYSTEM` is Table 11's system prompt: the annotators' guideline (printed on the
annotation sheets of ``medal_pipeline/annotation``) and the ``medal`` task's instruction to the
judge (``tasks/medal/templates.py``). The task families build on this package, never the reverse.
"""

from __future__ import annotations

MEDAL_ISSUES: tuple[str, ...] = (
    "uninterpretable",
    "unsafe",
    "lacks_empathy",
    "lacks_commonsense",
    "repetitive",
    "incoherent",
    "irrelevant",
    "nonfactual",
)
MEDAL_OTHER = "other"
MEDAL_OVERALL = "overall"
MEDAL_OVERALL_KEY = "overall_quality_rating"  # its key in the judge's JSON output (Table 11)
MEDAL_OVERALL_RANGE = (1, 5)

# Table 1: abbreviation and definition of each label.
ISSUE_ABBREVIATIONS: dict[str, str] = {
    "uninterpretable": "!Int",
    "unsafe": "!Safe",
    "lacks_empathy": "!Emp",
    "lacks_commonsense": "!Com",
    "repetitive": "Rep",
    "incoherent": "!Coh",
    "irrelevant": "!Rel",
    "nonfactual": "!Fac",
}
ISSUE_DEFINITIONS: dict[str, str] = {
    "uninterpretable": "Outputs unclear or confusing text to the point that its meaning is difficult to determine.",
    "unsafe": "Promotes or suggests harmful actions, or is offensive or threatening.",
    "lacks_empathy": "Fails to express appropriate emotional understanding when the context calls for it.",
    "lacks_commonsense": "Shows poor reasoning or contradicts basic, widely known everyday knowledge.",
    "repetitive": "Unnecessarily repeats the same point, phrase, or idea in a way that adds no value.",
    "incoherent": "Contradicts itself or makes statements that do not logically follow from prior context.",
    "irrelevant": "Introduces unrelated content that does not align with the flow or subject of the conversation.",
    "nonfactual": "Provides information that is objectively false or contradicts publicly verifiable facts.",
}
OVERALL_DEFINITION = "Overall assessment of the dialogue (1 Very bad – 5 Very good)."

MEDAL_LANGUAGES: tuple[str, ...] = ("zh", "en", "de", "fr", "pt", "es")
MEDAL_HUB_ID = "Johndfm/medal"

MEDAL_CITATION = """@misc{mendonca2026medal,
    title = "{MEDAL}: A Framework for Benchmarking {LLM}s as Multilingual Open-Domain Dialogue Evaluators",
    author = "Mendon{\\c{c}}a, John and Lavie, Alon and Trancoso, Isabel",
    year = "2026",
}"""

# Table 11's system prompt (§5.3.1: the guideline the human annotators were given), as printed in
# the paper; only the PDF's broken bold markers were repaired. Literal JSON braces are doubled
# (``{{``) because prompt templates are ``str.format`` strings.
MEDAL_SYSTEM = """You are an expert dialogue evaluator specializing in conversational AI. Your task is to evaluate the overall quality of a complete dialogue between two participants named "user" and "assistant". Evaluate each quality aspect based on the collective performance of all "assistant" responses throughout the dialogue. The "assistant" is just a name and has no role attached to it other than being one participant in the conversation. Do not evaluate the user's responses.

For each dimension below, mark it if the issue appears (label 1) at any point in the dialogue. A dialogue may have multiple issue labels.

1. **Uninterpretable:** A response is uninterpretable if its meaning is unclear or hard to figure out due to nonsensical wording, serious grammar issues, or ambiguous phrasing. **Mark if:** highly ambiguous; takes a lot of effort to understand; contains nonsense words. **Do not mark if:** off-topic but understandable; contradicts common knowledge; somewhat ungrammatical but clear.
2. **Unsafe:** A response includes content that is hateful, toxic, insulting, demeaning, threatening, inappropriate, or offensive. **Mark if:** uses slurs/insults; promotes harm; shows disrespect. **Do not mark if:** disagrees or expresses a strong opinion respectfully.
3. **Lacks Empathy:** The emotional tone is inappropriate or absent in a context that clearly calls for it. **Mark if:** responds coldly to distress/excitement; tone is dismissive or robotic. **Do not mark if:** neutral but appropriate; demonstrates understanding; reacts with appropriate sentiment.
4. **Lacks Commonsense:** The assistant says something that contradicts widely accepted everyday knowledge or makes an obvious error in reasoning. **Mark if:** asks obvious/trivial questions; draws conclusions contradicting everyday experience. **Do not mark if:** vague/off-topic but not factually wrong; error is due to rare/obscure fact.
5. **Repetitive:** The assistant repeats the same point, phrase, or idea multiple times in a way that feels unnatural. **Mark if:** same message/wording used unnecessarily; restates information without adding value. **Do not mark if:** minor repetition used for emphasis.
6. **Incoherent:** Statements conflict with earlier parts of the dialogue or don't logically follow context. **Mark if:** contradicts self; forgets/misunderstands user's earlier input; no logical progression. **Do not mark if:** ideas are loosely connected but not contradictory.
7. **Irrelevant:** Introduces ideas or questions that don't relate to the topic or flow. **Mark if:** sudden topic change without context; unrelated to prompt. **Do not mark if:** topic shift is natural or adds depth.
8. **Nonfactual:** Presents information that is clearly false based on objective, public facts (historical events, public figures, products). Confirm via search. **Mark if:** provides wrong answer to factual question; contradicts verifiable info. **Do not mark if:** subjective/speculative; fact is obscure.
9. **Other:** Issues that affect quality but don't fit categories above. Describe the issue if marked.

In the end, you should rate the overall quality of the responses given by the "assistant". Focus on the dialogue as a whole and prior annotations to rate the dialogue using the following 5-point scale to make your judgment: **5 – Very good** (Consistently appropriate, coherent, natural); **4 – Good** (Mostly appropriate, minor issues); **3 – Fair** (Mixed quality); **2 – Poor** (Many inappropriate/awkward responses); **1 – Very bad** (Mostly inappropriate/disruptive).

Your output must be a valid JSON object with the following structure:

```
{{
  "uninterpretable": {{ "label": 0/1, "comment": "" }},
  "unsafe": {{ "label": 0/1, "comment": "" }},
  "lacks_empathy": {{ "label": 0/1, "comment": "" }},
  "lacks_commonsense": {{ "label": 0/1, "comment": "" }},
  "repetitive": {{ "label": 0/1, "comment": "" }},
  "incoherent": {{ "label": 0/1, "comment": "" }},
  "irrelevant": {{ "label": 0/1, "comment": "" }},
  "nonfactual": {{ "label": 0/1, "comment": "" }},
  "other": {{ "label": 0/1, "comment": "" }},
  "overall_quality_rating": {{ "label": 1-5, "comment": "" }}
}}
```

For the dimensions, only include a comment if the label is 1. The comment should be a brief 1-sentence english explanation for that dimension. Always include a comment for the overall quality rating."""
