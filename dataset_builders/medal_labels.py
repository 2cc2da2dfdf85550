"""MEDAL's label set (Mendonça, Lavie and Trancoso: Table 1 and the Table 11 prompt), in one place.

The JSON keys of the Table 11 dialogue-evaluation prompt are the dimension names everywhere in
the harness (dataset labels, judge verdicts, meta-metrics, reports):

* eight binary issue labels (1 = the issue appears in some assistant turn), in Table 1's order;
* ``other`` — judged (Table 11 item 9) but not annotated by humans, so never meta-evaluated;
* ``overall`` — overall quality of the assistant on a 1–5 scale (JSON key
  ``overall_quality_rating``).
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
