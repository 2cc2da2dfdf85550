"""A score on any scale written anywhere in a judge's reply (MEEP 0–100, G-Eval 1–3):
:func:`parse_scale_score`, re-exported by :mod:`harness.parsing`.

Labelled forms first, then a leading or final number, then the only number on the scale; number
words count ("seventy-five", "setenta y cinco", "七十五"; ``text2num`` and ``cn2an``). Out of
range, a foreign denominator, a non-integer on an integer scale or disagreeing labels are parse
failures (``ParsedScore(None, "parse_error", why)``), never clipped or coerced.
"""

from __future__ import annotations

import re
import unicodedata

from harness.parsing.score import ParsedScore

# English number words of the fallback used when text2num is not importable.
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
# -- a score on any scale, written anywhere (MEEP) ------------------------------------------------
# MEEP §5.1: judges write long replies and "the location of scores within the returned text is
# unpredictable", so the score is looked for by form, most explicit first.

_TEXT2NUM_LANGUAGES = ("en", "es", "fr", "de", "pt", "it", "nl", "da")
# Articles that text2num reads as "1" in front of a number word ("le doy un ochenta" -> "1 80").
_ARTICLES = {
    "es": ("un", "una"),
    "fr": ("un", "une"),
    "pt": ("um", "uma"),
    "it": ("un", "una"),
    "de": ("ein", "eine", "einen"),
    "nl": ("een",),
    "da": ("en", "et"),
}
_CJK_RUN = "零〇一二两三四五六七八九十百"
# Chinese words that contain numeral characters but are not numbers ("一般" ordinary, "十分" very,
# "唯一" only, ...); ordinals (第一) are left alone too.
_CJK_NOT_NUMBERS = (
    "一般 一些 一样 一点 一下 一致 一定 一直 一起 一切 一旦 一方面 一种 一位 一个 一边 一向 一再 一贯 一味 "
    "唯一 统一 万一 之一 同一 单一 专一 十足 三思 百分之百"
).split()
_CJK_NUMERAL = re.compile(
    "(" + "|".join(_CJK_NOT_NUMBERS) + ")|(第)?(百分之)?([" + _CJK_RUN + "]+(?:点[零〇一二三四五六七八九]+)?)"
)
_CJK_CHAR = re.compile(r"[\u3400-\u9fff]")

_NUM_DOT = r"[-−]?\d+(?:\.\d+)?"
_NUM_COMMA = r"[-−]?\d+(?:[.,]\d+)?"
_MARK = r"[\s*_\"'`\[(<~≈“‘]*"
_HEDGE = r"(?:(?:around|about|approximately|roughly|aproximadamente|alrededor\s+de|unos|约|大约)\s*)?"
_SEP = (
    r"(?:\s*\([^()\n]{0,40}\))?\s*(?:[:=]|\b(?:is|of|would\s+be|will\s+be|should\s+be|es|de|ser[ií]a|ser[aá]|sea)\b"
    r"|为|是|為)?"
)
_LABEL_FINAL = (
    r"(?:(?<![A-Za-z])(?:final|overall|total)\s+(?:engagingness\s+)?(?:score|rating|grade)"
    r"|(?<![A-Za-z])(?:score|rating)\s+(?:final|overall)"
    r"|(?<![A-Za-zÀ-ÿ])(?:puntuaci[oó]n|calificaci[oó]n|nota|valoraci[oó]n)\s+(?:final|general|total)"
    r"|最终(?:评分|得分|分数)|总(?:评分|分)|综合(?:评分|得分))"
)
_LABEL_NOUN = (
    r"(?:(?<![A-Za-z])(?:score|rating|grade|engagingness|engagement)"
    r"|(?<![A-Za-zÀ-ÿ])(?:puntuaci[oó]n|puntaje|calificaci[oó]n|nota|valoraci[oó]n|evaluaci[oó]n)"
    r"|评分|分数|得分|打分|分值|吸引力|参与度)"
)
_VERB_EN = (
    r"(?<![A-Za-z])(?:rate|rates|rated|rating|give|gives|giving|gave|assign|assigns|assigned|assigning|award|"
    r"awards|awarded|score|scores|scored|scoring|deserves?|gets?|earns?|merits?|say|go\s+with|put\s+it\s+at)"
    r"(?:\s+(?:this|that|the|it|its|response|reply|answer|turn|utterance|one|dialogue|dialog|conversation|a|an|"
    r"as|at|around|about|roughly|approximately|score|rating|of|solid|high|low|fairly|pretty|relatively|"
    r"overall|final|engagingness|engagement|with|me|to)\b){0,6}\s*[:=]?"
)
_VERB_ES = (
    r"(?<![A-Za-zÀ-ÿ])(?:doy|dar[ií]a|dar|darle|otorgo|otorgar[ií]a|asigno|asignar[ií]a|asignar|califico|"
    r"calificar[ií]a|calificar|punt[uú]o|puntuar[ií]a|eval[uú]o|evaluar[ií]a|merece|obtiene|recibe|pongo|"
    r"pondr[ií]a)"
    r"(?:\s+(?:le|la|lo|les|esta|este|esa|ese|el|respuesta|di[aá]logo|conversaci[oó]n|turno|con|un|una|"
    r"puntuaci[oó]n|puntaje|calificaci[oó]n|nota|de|como|alrededor|aproximadamente|unos|final|general|en)\b)"
    r"{0,6}\s*[:=]?"
)
_VERB_ZH = r"(?:打出|给出|给予|评为|定为|打|给)[^\d\n。，,.!?！？;；:]{0,10}?"
_PREFIX_FINAL = re.compile(_LABEL_FINAL + _SEP + r"\s*" + _HEDGE + _MARK + r"$", re.I)
_PREFIX_LABELLED = re.compile(_LABEL_NOUN + _SEP + r"\s*" + _HEDGE + _MARK + r"$", re.I)
_PREFIX_VERB = re.compile(r"(?:" + _VERB_EN + r"|" + _VERB_ES + r"|" + _VERB_ZH + r")" + _MARK + r"$", re.I)
# After a verb form the number must end the phrase ("I'd say 2." yes, "I'd say 2 things" no).
_VERB_FOLLOW = re.compile(
    r"^(?:\s*(?:$|[^\w\s]|\n|分)|\s+(?:out|of|points?|pts|puntos?|de|sobre|because|since|as|for|on|in|overall|"
    r"and|but|given|considering|porque|ya|y|pero|en|para|según|to)\b)",
    re.I,
)
_PREFIX_BOLD = re.compile(r"\*\*\s*$")
_SUFFIX_BOLD = re.compile(r"^\s*(?:/\s*\d+(?:\.\d+)?)?\s*%?\s*\*\*")
_SUFFIX_UNIT = re.compile(r"^\s*(?:points?\b|pts\b|puntos?\b|分(?![之钟析类别配布开享散数]))", re.I)
_DENOMINATOR = re.compile(
    r"^\s*(?:/|\bout\s+of\b|\bde\b|\bsobre\b)\s*(?:a\s+)?(\d+(?:\.\d+)?)(?![\d.]*\d)", re.I
)
_LIST_MARKER = re.compile(r"^[.)]\s+\S")
# "one of the best", "uno de los mejores": a quantity, not a score
_PARTITIVE = re.compile(r"^\s+(?:of|de|del)\s+(?:the|my|its|all|these|those|los|las|el|la|mis|sus)\b", re.I)


_RANGE = re.compile(
    r"(?<![\w.])(\d+(?:\.\d+)?)[ \t]*(?:-|–|—|~|\bto\b)[ \t]*(\d+(?:\.\d+)?)(?![\w.]*\d)", re.I
)


def _mask_patterns(num: str) -> list[re.Pattern[str]]:
    return [
        # ranges / scale statements: "0 to 100", "(1-3)", "del 0 al 100", "between 1 and 3", "0到100"
        re.compile(num + r"[ \t]*(?:-|–|—|~|\bto\b|\ba\b|\bal\b|\bhasta\b|到|至)[ \t]*" + num, re.I),
        re.compile(r"(?:between|entre)\s+" + num + r"\s+(?:and|y)\s+" + num, re.I),
        # restated scale points: "a score of 0 means ...", "1 (dull) means", "0分表示"
        re.compile(
            num
            + r"[ \t]*分?[ \t]*(?:\([^()\n]{0,40}\))?[ \t]*(?:\bmeans?\b|\bmeaning\b|\bindicates?\b|\brepresents?\b|"
            r"\bstands\s+for\b|\bwould\s+mean\b|=\s*['\"‘“]|\bsignific\w*|\bindica\b|\brepresenta\b|表示|代表|意味|"
            r"\bis\s+(?:the\s+)?(?:lowest|highest|worst|best|minimum|maximum)\b)",
            re.I,
        ),
        # the scale itself: "scale of 100", "100-point scale", "满分100分", "百分制", "100分制"
        re.compile(r"(?:scale|escala)\s+(?:of|from|de|del)\s+" + num, re.I),
        re.compile(num + r"[\s-]*(?:point|puntos?)\s+(?:scale|escala)", re.I),
        re.compile(r"满分\s*(?:为|是|:)?\s*" + num + r"\s*分?"),
        re.compile(num + r"\s*分制"),
        # denominators: "75/100", "75 out of 100", "75 de 100" (the numerator stays a candidate)
        re.compile(r"(?:/|\bout\s+of\b|\bsobre\b|(?<=\d)\s+de\b)\s*(?:a\s+)?" + num, re.I),
    ]


def _base_language(language: str | None) -> str:
    return re.split(r"[-_]", (language or "en").strip().lower() or "en")[0]


_PROTECT = "\ue000"  # a private-use character stands in for an article while text2num runs


def _protect_articles(text: str, lang: str, alpha2digit) -> tuple[str, list[str]]:
    """Indefinite articles that text2num would read as "1": dropped before a number word ("le doy un
    ochenta" -> "le doy ochenta"), otherwise hidden behind a placeholder ("una puntuación" stays)."""
    arts = _ARTICLES.get(lang)
    if not arts:
        return text, []
    hidden: list[str] = []

    def repl(m: re.Match[str]) -> str:
        word = m.group(3)
        if word:
            try:
                if alpha2digit(word, lang, threshold=0)[:1].isdigit():
                    return ""
            except Exception:  # noqa: BLE001 - text2num rejects odd input; keep the article
                pass
        hidden.append(m.group(1))
        return _PROTECT + m.group(2)

    pattern = r"\b(" + "|".join(arts) + r")\b(\s*)(?=([^\W\d_][\w-]*)?)"
    return re.sub(pattern, repl, text, flags=re.I), hidden


def _restore(text: str, hidden: list[str]) -> str:
    it = iter(hidden)
    return re.sub(_PROTECT, lambda _m: next(it, ""), text)


def _fallback_words(text: str) -> str:
    """Without text2num: English zero..ten and "one hundred" only."""
    words = {"zero": 0, **_WORDS}
    text = re.sub(r"\b(?:one\s+)?hundred\b", "100", text, flags=re.I)
    return re.sub(
        r"\b(" + "|".join(words) + r")\b", lambda m: str(words[m.group(1).lower()]), text, flags=re.I
    )


def _cjk_numerals(text: str, strict: bool) -> str:
    """Chinese numerals -> digits ("七十五" -> "75", "百分之八十" -> "80%"). ``strict`` (the text
    searched for a lone number) converts a single numeral character only before 分."""
    if not any(c in _CJK_RUN for c in text):
        return text
    try:
        import cn2an
    except ImportError:  # pragma: no cover - cn2an is a dependency
        return text

    def repl(m: re.Match[str]) -> str:
        if m.group(1) or m.group(2):  # a word that is not a number, or an ordinal
            return m.group(0)
        pct, run = m.group(3), m.group(4)
        after = text[m.end() : m.end() + 2]
        if run == "十" and after[:1] == "分" and _CJK_CHAR.match(after[1:2] or " "):
            return m.group(0)  # 十分 + adjective: "very", not ten points
        if strict and len(run) < 2 and not pct and after[:1] != "分":
            return m.group(0)
        try:
            v = float(cn2an.cn2an(run, "smart"))
        except (ValueError, KeyError, TypeError):
            return m.group(0)
        s = str(int(v)) if v.is_integer() else repr(v)
        return s + "%" if pct else s

    return _CJK_NUMERAL.sub(repl, text)


def _numbers_to_digits(text: str, language: str | None, threshold: float) -> str:
    """Number words -> digits with text2num (en/es/fr/de/pt/it/nl/da: the item's language, then
    English) and cn2an (Chinese numerals). ``threshold`` is text2num's: isolated numbers below it
    stay words (0 converts every one, for the labelled forms; 3 keeps "one of the ..." as words)."""
    lang = _base_language(language)
    langs = [lang] if lang in _TEXT2NUM_LANGUAGES else []
    if "en" not in langs:
        langs.append("en")
    try:
        from text_to_num import alpha2digit
    except ImportError:  # pragma: no cover - text2num is a dependency
        text = _fallback_words(text)
    else:
        for code in langs:
            text, hidden = _protect_articles(text, code, alpha2digit)
            try:
                text = alpha2digit(text, code, threshold=threshold)
            except Exception:  # noqa: BLE001 - keep the text as it is rather than fail the parse
                pass
            text = _restore(text, hidden)
    return _cjk_numerals(text, strict=threshold > 0)


class _Tok:
    __slots__ = ("start", "end", "text", "value", "den", "masked", "ok_follow")

    def __init__(self, m: re.Match[str], text: str, masks: list[tuple[int, int]]) -> None:
        self.start, self.end = m.start(), m.end()
        self.text = m.group(0)
        self.value = float(self.text.replace("−", "-").replace(",", "."))
        d = _DENOMINATOR.match(text[self.end :])
        self.den = float(d.group(1)) if d else None
        self.masked = any(a <= self.start and self.end <= b for a, b in masks)
        nxt = text[self.end : self.end + 1]
        self.ok_follow = not (nxt.isascii() and nxt.isalnum()) and not _PARTITIVE.match(text[self.end :])


def _tokens(text: str, comma_decimals: bool) -> list[_Tok]:
    num = _NUM_COMMA if comma_decimals else _NUM_DOT
    pattern = re.compile(r"(?<![A-Za-z0-9_./])(?<!\d,)" + num + r"(?![\d])")
    masks = [
        (m.start(), m.end()) for p in _mask_patterns(r"(?<![A-Za-z0-9_.])" + num) for m in p.finditer(text)
    ]
    out = []
    for m in pattern.finditer(text):
        # a "-" right after a digit is a range dash ("1-3"), not a sign
        if m.group(0)[0] in "-−" and m.start() > 0 and text[m.start() - 1].isdigit():
            continue
        out.append(_Tok(m, text, masks))
    return out


def _labelled(text: str, toks: list[_Tok]) -> tuple[list[_Tok], list[_Tok]]:
    final, labelled = [], []
    for t in toks:
        if t.masked or not t.ok_follow:
            continue
        before = text[max(0, t.start - 120) : t.start]
        after = text[t.end :]
        if _PREFIX_FINAL.search(before):
            final.append(t)
        elif (
            _PREFIX_LABELLED.search(before)
            or (_PREFIX_VERB.search(before) and _VERB_FOLLOW.match(after))
            or t.den is not None
            or _SUFFIX_UNIT.match(after)
            or (_PREFIX_BOLD.search(before) and _SUFFIX_BOLD.match(after))
        ):
            labelled.append(t)
    return final, labelled


def _leading(text: str, toks: list[_Tok]) -> _Tok | None:
    m = re.match(r"^(?:[\s\"'`*_#>\[(]|-\s)*", text)
    lead = m.end() if m else 0  # the pattern matches every text (possibly empty)
    t = next((t for t in toks if t.start == lead), None)
    if t is None or t.masked or not t.ok_follow:
        return None
    after = text[t.end :]
    if _LIST_MARKER.match(after) and t.value.is_integer():
        nxt = int(t.value) + 1
        if re.search(r"\n[ \t]*" + str(nxt) + r"[.)]\s", text):
            return None  # "1. ... 2. ..." is a numbered list, not a score
    ok = re.match(
        r"^(?:\s*(?:/|out\s+of|de|sobre)\s*\d+(?:\.\d+)?)?\s*(?:$|[\n.,;:!?)\]*%/\-–—(。，；！]|分|points?\b|pts\b|"
        r"puntos?\b|because\b|since\b|as\b|porque\b|ya\s+que\b|因为)",
        after,
        re.I,
    )
    return t if ok else None


def _final(text: str, toks: list[_Tok]) -> _Tok | None:
    usable = [t for t in toks if not t.masked and t.ok_follow]
    if not usable:
        return None
    t = usable[-1]
    tail = re.match(
        r"^(?:\s*(?:/|out\s+of|de|sobre)\s*\d+(?:\.\d+)?)?\s*(?:%|分|points?|puntos?)?[\s*_\"'`)\].!。]*$",
        text[t.end :],
        re.I,
    )
    if not tail:
        return None
    line = text[: t.start].rsplit("\n", 1)[-1]
    if re.fullmatch(r"[\s\"'`*_#>\[(]*", line) or re.search(r"[:=]\s*[*_\"'`\[(]*$", line):
        return t
    return None


def _fmt(v: float) -> str:
    return f"{v:g}"


def _check(t: _Tok, lo: float, hi: float, integer: bool, how: str) -> ParsedScore:
    scale = f"{_fmt(lo)}-{_fmt(hi)}"
    if t.den is not None and t.den != hi:
        return ParsedScore(None, "parse_error", f"score {t.text}/{_fmt(t.den)} is not on the {scale} scale")
    if not lo <= t.value <= hi:
        return ParsedScore(None, "parse_error", f"score {t.text!r} is outside {scale}")
    if integer and not t.value.is_integer():
        return ParsedScore(None, "parse_error", f"score {t.text!r} is not an integer on the {scale} scale")
    return ParsedScore(float(t.value), "ok", how)


def parse_scale_score(
    text: str | None, lo: float, hi: float, *, integer: bool = False, language: str | None = None
) -> ParsedScore:
    """The score on ``[lo, hi]`` that a judge wrote anywhere in its reply (MEEP §5.1: "the location
    of scores within the returned text is unpredictable").

    Number words become digits first: English and the item's ``language`` with text2num's
    ``alpha2digit`` (en/es/fr/de/pt/it/nl/da: "seventy-five", "setenta y cinco"), Chinese numerals
    with cn2an ("七十五", "百分之八十"); full-width digits and colons are NFKC-normalised. Then, most
    explicit form first:

    1. a labelled score: "Final score: 70" / "Puntuación final" / "最终评分" before the other labels;
       then "Score: 75", "Engagingness: 2", "Rating (0-100): 80", "Puntuación: 80", "评分：85",
       "a score of 75", "I would rate this response 80", "I would give it a 75 out of 100",
       "le daría un 80", "我给这个回应打85分", "**75**", "75/100", "75 out of 100", "80 points",
       "85分". Several labelled values that *differ* are a parse failure ("ambiguous");
    2. a leading number ("75", "75 - engaging because ...", not a "1. ... 2. ..." list);
    3. a lone final number (on its own last line, or after a final colon: "... so: 80");
    4. the only number on the scale anywhere in the text (several distinct ones: a failure).

    Restated scale points never count ("a score of zero means ‘disengaging’", "1 (dull) means",
    "0分表示", "from 0 to 100", "(1-3)", "满分100分"), nor ordinals ("3rd") or denominators.
    A value outside ``[lo, hi]`` is a parse failure, never clipped; a denominator other than ``hi``
    ("8/10" on 0-100) is a parse failure, never rescaled, and neither is a value rescaled ("Score:
    0.8" on 0-100 is 0.8); with ``integer=True`` a non-integer is a parse failure. Returns
    ``ParsedScore(value, "ok", rule)`` or ``ParsedScore(None, "parse_error", why)``.

    >>> parse_scale_score("I would give this response a 75 out of 100.", 0, 100).value
    75.0
    >>> parse_scale_score("Score: seventy-five", 0, 100).value
    75.0
    >>> parse_scale_score("Puntuación: setenta y cinco", 0, 100, language="es").value
    75.0
    >>> parse_scale_score("评分：八十五分", 0, 100, language="zh").value
    85.0
    >>> parse_scale_score("- Engagingness: 2", 1, 3, integer=True).value
    2.0
    >>> parse_scale_score("Score: 150", 0, 100).detail
    "score '150' is outside 0-100"
    >>> parse_scale_score("Score: 70. On reflection, score: 80.", 0, 100).status
    'parse_error'
    """
    if text is None or not str(text).strip():
        return ParsedScore(None, "parse_error", "empty output")
    if not lo < hi:
        raise ValueError(f"lo must be < hi, got {lo}, {hi}")
    raw = unicodedata.normalize("NFKC", str(text))
    comma = _base_language(language) != "en"
    scale = f"{_fmt(lo)}-{_fmt(hi)}"

    lab_text = _numbers_to_digits(raw, language, threshold=0)
    toks = _tokens(lab_text, comma)
    final, labelled = _labelled(lab_text, toks)
    for group in (final, labelled):
        values = sorted({t.value for t in group})
        if len(values) > 1:
            return ParsedScore(
                None, "parse_error", f"ambiguous: labelled scores disagree ({', '.join(map(_fmt, values))})"
            )
        if values:
            bad = [t for t in group if t.den is not None and t.den != hi]
            return _check(bad[0] if bad else group[0], lo, hi, integer, "labelled")
    t = _leading(lab_text, toks)
    if t is not None:
        return _check(t, lo, hi, integer, "leading number")
    t = _final(lab_text, toks)
    if t is not None:
        return _check(t, lo, hi, integer, "final number")

    any_text = _numbers_to_digits(raw, language, threshold=3)
    loose = [t for t in _tokens(any_text, comma) if not t.masked and t.ok_follow]
    in_scale = {t.value: t for t in loose if lo <= t.value <= hi}
    if len(in_scale) == 1:
        return _check(next(iter(in_scale.values())), lo, hi, integer, "only number on the scale")
    if len(in_scale) > 1:
        return ParsedScore(
            None,
            "parse_error",
            f"several numbers on the {scale} scale ({', '.join(map(_fmt, sorted(in_scale)))}) and none labelled",
        )
    if loose:
        out = sorted({t.text for t in loose})
        if len(out) == 1:
            return ParsedScore(None, "parse_error", f"score {out[0]!r} is outside {scale}")
        return ParsedScore(None, "parse_error", f"no number on the {scale} scale (found {', '.join(out)})")
    for m in _RANGE.finditer(lab_text):
        a, b = (float(x.replace(",", ".")) for x in m.group(1, 2))
        if lo <= a < b <= hi and (a, b) != (lo, hi):
            return ParsedScore(None, "parse_error", f"a range ({m.group(0).strip()}), not one {scale} score")
    return ParsedScore(None, "parse_error", f"no {scale} score in the output")
