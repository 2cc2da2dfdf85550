"""Per-language literals in one place (lighteval-style translation literals).

Templates and scorers look languages up here: ISO code ↔ name, the label words used for P(Yes)
scoring, and the speaker tags used when a dialogue is flattened into a prompt.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LanguageLiterals:
    code: str  # ISO 639-1
    name: str  # English name, as used in xDial-Eval column prefixes ("english_ctx")
    native: str
    yes: str  # native label words (for natively-prompted templates)
    no: str


LANGUAGES: dict[str, LanguageLiterals] = {
    lit.code: lit
    for lit in [
        LanguageLiterals("en", "english", "English", "Yes", "No"),
        LanguageLiterals("zh", "chinese", "中文", "是", "否"),
        LanguageLiterals("es", "spanish", "Español", "Sí", "No"),
        LanguageLiterals("de", "german", "Deutsch", "Ja", "Nein"),
        LanguageLiterals("fr", "french", "Français", "Oui", "Non"),
        LanguageLiterals("ja", "japanese", "日本語", "はい", "いいえ"),
        LanguageLiterals("ko", "korean", "한국어", "예", "아니요"),
        LanguageLiterals("hi", "hindi", "हिन्दी", "हाँ", "नहीं"),
        LanguageLiterals("ar", "arabic", "العربية", "نعم", "لا"),
        LanguageLiterals("ru", "russian", "Русский", "Да", "Нет"),
        LanguageLiterals("pt", "portuguese", "Português", "Sim", "Não"),
        LanguageLiterals("it", "italian", "Italiano", "Sì", "No"),
    ]
}

XDIAL_LANGUAGES = ("en", "zh", "es", "de", "fr", "ja", "ko", "hi", "ar", "ru")

# Speaker tags of the xDial-Eval prompts ([H] human, [C] chatbot).
SPEAKER_TAGS = {"user": "[H]", "assistant": "[C]"}


def language(code_or_name: str) -> LanguageLiterals:
    key = code_or_name.strip().lower()
    if key in LANGUAGES:
        return LANGUAGES[key]
    for lit in LANGUAGES.values():
        if lit.name == key:
            return lit
    raise KeyError(f"unknown language {code_or_name!r}; known codes: {', '.join(sorted(LANGUAGES))}")


def normalize_languages(values: list[str] | tuple[str, ...] | None) -> list[str] | None:
    """Accept codes or names, comma-separated or repeated; return ISO codes (None = all)."""
    if not values:
        return None
    out: list[str] = []
    for v in values:
        for part in str(v).split(","):
            if part.strip():
                code = language(part).code
                if code not in out:
                    out.append(code)
    return out
