"""Parsers for judges that *write* their verdict (UPHELD App. H: yes/no and Likert 1–5, with or
without an explanation; MEEP: a score on any scale, anywhere in the reply).

A parser returns a :class:`~harness.parsing.score.ParsedScore`: the value when the text states one
unambiguously, otherwise ``ParsedScore(None, "parse_error", why)``. Nothing is coerced to 0: the caller
counts the failure and keeps the raw text.

* :func:`parse_yes_no` — the verdict word the answer leads with ("Yes", "**No.**", "Answer: yes,
  because …"); when the answer does not start with one, a single explicit ``Answer:/Verdict:/
  Output:`` line; an answer that only mentions both words in passing is a parse failure.
* :func:`parse_likert` — an integer on the scale: a leading number ("4", "4/5", "**3**"), a
  labelled one anywhere ("Score: 4", "rating of 4 out of 5"), a final one after a colon or on its
  own last line ("…, so: 3"), or the only on-scale number of the text; number words count
  ("four"). A number outside the scale is a parse failure ("outside 1-5"), never clipped; several
  candidate numbers are a parse failure ("several numbers").

A score on any scale written anywhere in the reply (MEEP 0–100, G-Eval 1–3) is
:func:`harness.parsing.scale.parse_scale_score`.
"""

from __future__ import annotations

import re

from harness.parsing.score import ParsedScore

_WORDS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
_LEAD_STRIP = re.compile(r"^[\s\"'`*_#>\-:.\[\]()]*")
_YES_NO_LEAD = re.compile(r"^(yes|no)\b", re.I)
_LABELLED_YES_NO = re.compile(
    r"\b(?:answer|verdict|output|judg(?:e)?ment|decision|final answer)\s*[:=\-]\s*[\"'*_`\[(]*\s*(yes|no)\b",
    re.I,
)
_NUM = r"(\d+(?:\.\d+)?|" + "|".join(_WORDS) + r")"
_LEAD_NUM = re.compile(r"^" + _NUM + r"(?:\s*(?:/|out of)\s*\d+)?(?![\d.]*\w)", re.I)
_LABELLED_NUM = re.compile(
    r"\b(?:score|rating|rated|rate|likert(?: score)?|grade|answer|output)\b(?:\s+(?:is|of|=|:))?\s*[:=\-]?\s*[\"'*_`\[(]*\s*"
    + _NUM
    + r"\b",
    re.I,
)
_FINAL_NUM = re.compile(r"(?:[:=]|\n)\s*[*_`\[(]*" + _NUM + r"(?:\s*/\s*\d+)?[*_`\])]*\s*[.!]?\s*$", re.I)
_ANY_NUM = re.compile(r"(?<![\w.])" + _NUM + r"(?:\s*(?:/|out of)\s*(\d+))?(?![\w.]*\d)", re.I)


def _value(tok: str) -> float:
    tok = tok.lower()
    return float(_WORDS[tok]) if tok in _WORDS else float(tok)


def parse_yes_no(text: str | None, yes: str = "Yes", no: str = "No") -> ParsedScore:
    """1.0 for a yes verdict, 0.0 for a no verdict, a parse failure otherwise."""
    if text is None or not str(text).strip():
        return ParsedScore(None, "parse_error", "empty output")
    t = str(text)
    words = {yes.casefold(): 1.0, no.casefold(): 0.0}
    lead = _LEAD_STRIP.sub("", t)
    m = re.match(r"^(" + re.escape(yes) + "|" + re.escape(no) + r")\b", lead, re.I)
    if m:
        return ParsedScore(words[m.group(1).casefold()], "ok")
    found = {x.casefold() for x in _LABELLED_YES_NO.findall(t)} if (yes, no) == ("Yes", "No") else set()
    if len(found) == 1:
        return ParsedScore(words[found.pop()], "ok")
    if len(found) > 1:
        return ParsedScore(None, "parse_error", "labelled answer lines disagree (both yes and no)")
    mentions = {
        w.casefold() for w in re.findall(r"\b(" + re.escape(yes) + "|" + re.escape(no) + r")\b", t, re.I)
    }
    if len(mentions) == 1:
        return ParsedScore(words[mentions.pop()], "ok", "verdict word found inside the answer")
    if not mentions:
        return ParsedScore(None, "parse_error", f"no {yes!r}/{no!r} verdict in the output")
    return ParsedScore(None, "parse_error", f"ambiguous: the output mentions both {yes!r} and {no!r}")


def parse_likert(text: str | None, lo: int = 1, hi: int = 5) -> ParsedScore:
    """An integer score in ``[lo, hi]`` stated by the output, a parse failure otherwise."""
    if text is None or not str(text).strip():
        return ParsedScore(None, "parse_error", "empty output")
    t = str(text)
    lead = _LEAD_STRIP.sub("", t)
    m = _LEAD_NUM.match(lead)
    if m and not m.group(1)[0].isdigit() and re.match(r"\s+[A-Za-z]", lead[m.end() :]):
        m = None  # "Two of the facts match…" is prose, not a leading score
    candidates: list[str] = []
    if m:
        candidates = [m.group(1)]
    else:
        candidates = _LABELLED_NUM.findall(t) or _FINAL_NUM.findall(t)
        if not candidates:
            alone = [g[0] for g in _ANY_NUM.findall(t) if not g[1] or g[1] == str(hi)]
            in_scale = {a for a in alone if _is_int(a) and lo <= _value(a) <= hi}
            if len(in_scale) == 1:
                candidates = [in_scale.pop()]
            elif len(in_scale) > 1:
                return ParsedScore(
                    None, "parse_error", f"several numbers on the {lo}-{hi} scale: {sorted(in_scale)}"
                )
            elif alone:
                return ParsedScore(None, "parse_error", f"score {alone[0]!r} is outside {lo}-{hi}")
    if not candidates:
        return ParsedScore(None, "parse_error", f"no {lo}-{hi} score in the output")
    tok = candidates[0]
    if not _is_int(tok):
        return ParsedScore(None, "parse_error", f"score {tok!r} is not an integer on the {lo}-{hi} scale")
    v = _value(tok)
    if not lo <= v <= hi:
        return ParsedScore(None, "parse_error", f"score {tok!r} is outside {lo}-{hi}")
    return ParsedScore(v, "ok")


def _is_int(tok: str) -> bool:
    try:
        return float(_value(tok)).is_integer()
    except ValueError:
        return False
