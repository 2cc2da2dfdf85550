"""Structured multi-label answers: binary issue labels + an overall score written as JSON
(MEDAL Table 11).

The judge is asked for one JSON object, ``{"<label>": {"label": 0/1, "comment": ""}, ...,
"<overall_key>": {"label": 1-5, "comment": ""}}``. :func:`issues_schema` is the matching JSON
schema, sent to backends with guided decoding (vLLM, OpenAI-compatible servers); every other
backend generates freely and :func:`parse_issues` validates the text:

* the object is found after any reasoning trace (``<think>…</think>``), inside a Markdown code
  fence or as the last balanced ``{…}`` of the text that parses as JSON (strict JSON: nothing is
  repaired or guessed);
* keys match case-insensitively, with spaces / hyphens read as underscores (``"Lacks Empathy"``);
  a label written bare (``"unsafe": 0``) is accepted like ``{"label": 0}``;
* an issue label must be 0/1 (also ``true``/``false``, ``"0"``/``"1"``, ``"yes"``/``"no"``,
  ``"zero"``/``"one"``); the overall score a number on its scale (digits or an English number
  word, ``"four"``). Anything else — a missing key, ``2``, ``-1``, ``0.5``, ``"maybe"``, an overall
  of ``7`` — is ``None`` for that field with the reason kept in ``errors``: never coerced to 0 and
  never clipped.

The parsed answer's status is ``"ok"`` when the overall score parsed (labels that failed are counted
per dimension by the meta-metrics), ``"parse_error"`` otherwise.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from harness.jsontypes import JSON, JSONObject

_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(\{.*?\})\s*```", re.S)
_BINARY = {
    "0": 0,
    "1": 1,
    "false": 0,
    "true": 1,
    "no": 0,
    "yes": 1,
    "zero": 0,
    "one": 1,
}
_NUMBER_WORDS = {
    "zero": 0,
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


@dataclass
class ParsedIssues:
    """A judge model's JSON answer, parsed: each issue label (0/1, or ``None`` with the reason in
    ``errors``), the overall score, the comments, and ``status`` / ``detail`` as in
    :class:`~harness.parsing.score.ParsedScore`."""

    labels: dict[str, int | None]
    overall: float | None
    comments: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    status: str = "ok"
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.overall is not None


#: Comments are asked to be one sentence; bounding them keeps a guided answer from spending the
#: whole token budget inside one string (and then being cut off, unparseable).
COMMENT_MAX_CHARS = 400


def issues_schema(
    labels: Sequence[str], overall_key: str, overall_range: tuple[float, float] = (1, 5)
) -> JSONObject:
    """JSON schema of the answer object (for guided decoding)."""

    def entry(value_schema: JSONObject) -> JSONObject:
        return {
            "type": "object",
            "properties": {
                "label": value_schema,
                "comment": {"type": "string", "maxLength": COMMENT_MAX_CHARS},
            },
            "required": ["label", "comment"],
            "additionalProperties": False,
        }

    lo, hi = overall_range
    props: JSONObject = {name: entry({"type": "integer", "enum": [0, 1]}) for name in labels}
    props[overall_key] = entry({"type": "integer", "minimum": int(lo), "maximum": int(hi)})
    return {
        "type": "object",
        "properties": props,
        "required": [*labels, overall_key],
        "additionalProperties": False,
    }


def _norm_key(key: str) -> str:
    return re.sub(r"[\s\-]+", "_", str(key).strip()).casefold()


def _balanced_objects(text: str) -> tuple[list[str], bool]:
    """Every balanced top-level ``{…}`` span of ``text`` (string-aware), and whether an object
    was still open at the end of the text."""
    spans, depth, start, in_str, esc = [], 0, -1, False, False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"' and depth > 0:
            in_str = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append(text[start : i + 1])
    return spans, depth > 0


def extract_json_object(text: str | None) -> tuple[JSONObject | None, str]:
    """The verdict object in ``text`` and ``""``, or ``None`` and why not."""
    if text is None or not str(text).strip():
        return None, "empty output"
    body = _THINK.sub("", str(text))
    if "<think>" in body.lower() and "</think>" not in body.lower():
        return None, "reasoning trace never closed (</think> missing): generation budget exhausted?"
    objects, unclosed = _balanced_objects(body)
    candidates = [m.group(1) for m in _FENCE.finditer(body)] + objects
    last_error = ""
    for cand in reversed(candidates):
        try:
            # strict=False: a raw control character inside a string (some guided decoders let one
            # into a comment) is not a reason to discard the labels; they are validated below.
            obj = json.loads(cand, strict=False)
        except json.JSONDecodeError as e:
            last_error = f"invalid JSON: {e.msg} at line {e.lineno} column {e.colno}"
            continue
        if isinstance(obj, dict):
            return obj, ""
    if unclosed:
        return None, "JSON object not closed (output truncated?)"
    if last_error:
        return None, last_error
    return None, "no JSON object in the output"


def _binary(value: JSON) -> tuple[int | None, str]:
    if isinstance(value, bool):
        return int(value), ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value in (0, 1):
            return int(value), ""
        return None, f"label {value!r} is not 0 or 1"
    if isinstance(value, str) and value.strip().casefold() in _BINARY:
        return _BINARY[value.strip().casefold()], ""
    return None, f"label {value!r} is not 0 or 1"


def _number(value: JSON, lo: float, hi: float) -> tuple[float | None, str]:
    if isinstance(value, bool):
        return None, f"score {value!r} is not a number"
    v: float | None = None
    if isinstance(value, (int, float)):
        v = float(value)
    elif isinstance(value, str):
        s = value.strip().casefold()
        if s in _NUMBER_WORDS:
            v = float(_NUMBER_WORDS[s])
        else:
            try:
                v = float(s.split("/")[0].strip())
            except ValueError:
                return None, f"score {value!r} is not a number"
    if v is None or not math.isfinite(v):
        return None, f"score {value!r} is not a number"
    if not lo <= v <= hi:
        return None, f"score {v:g} is outside {lo:g}-{hi:g}"
    return v, ""


def parse_issues(
    text: str | None,
    labels: Sequence[str],
    overall_key: str,
    overall_range: tuple[float, float] = (1, 5),
) -> ParsedIssues:
    """Parse and validate a JSON answer; see the module docstring for what is accepted."""
    obj, why = extract_json_object(text)
    if obj is None:
        return ParsedIssues(
            labels={name: None for name in labels},
            overall=None,
            errors={"json": why},
            status="parse_error",
            detail=why,
        )
    by_key: Mapping[str, JSON] = {_norm_key(k): v for k, v in obj.items()}
    out = ParsedIssues(labels={}, overall=None)
    lo, hi = overall_range
    for name in (*labels, overall_key):
        key = _norm_key(name)
        if key not in by_key and name == overall_key and "overall" in by_key:
            key = "overall"
        if key not in by_key:
            out.errors[name] = "missing key"
            if name != overall_key:
                out.labels[name] = None
            continue
        entry = by_key[key]
        value = entry.get("label") if isinstance(entry, Mapping) else entry
        if isinstance(entry, Mapping) and "label" not in entry:
            value, err = None, "no 'label' field"
        elif name == overall_key:
            out.overall, err = _number(value, lo, hi)
        else:
            out.labels[name], err = _binary(value)
        if isinstance(entry, Mapping) and "label" not in entry and name != overall_key:
            out.labels[name] = None
        if err:
            out.errors[name] = err
        comment = entry.get("comment") if isinstance(entry, Mapping) else None
        if isinstance(comment, str) and comment.strip():
            out.comments[name] = comment.strip()
    if out.overall is None:
        out.status = "parse_error"
    if out.errors:
        out.detail = "; ".join(f"{k}: {v}" for k, v in out.errors.items())
    return out
