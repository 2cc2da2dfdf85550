"""Languages and ids of imported records: language cells read as ISO 639 codes, ``--language``
selection (``zh`` selects ``zh`` and ``zh-CN`` rows), ids qualified by language when one config
holds several languages of the same items, and the error of a selection that leaves nothing."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

_CODE = re.compile(r"^([A-Za-z]{2,3})([-_][A-Za-z0-9]{2,8})*$")


def language_code(raw: str) -> str | None:
    """A language cell as an ISO 639 code: ``zh``, ``ZH`` -> ``zh``; ``zh_CN`` -> ``zh-CN``; a
    language name the harness knows (``Chinese``) -> ``zh``; None when it is neither."""
    text = raw.strip()
    if _CODE.match(text):
        head, *rest = re.split(r"[-_]", text)
        return "-".join([head.lower(), *rest])
    from harness.languages import language

    try:
        return language(text).code
    except KeyError:
        return None


def selected(lang: str, languages: Iterable[str]) -> bool:
    """Whether a record's language is selected: the code itself or its primary language subtag."""
    wanted = set(languages)
    return not wanted or lang in wanted or lang.split("-")[0] in wanted


def qualify_ids(records: list[dict[str, Any]]) -> bool:
    """When records of one config share an id across languages (translations of the same item),
    every id becomes ``<id>-<language>`` (``item_id`` keeps the shared id). Returns whether it did."""
    langs_by_id: dict[str, set[str]] = {}
    for r in records:
        langs_by_id.setdefault(r["id"], set()).add(r["language"])
    if all(len(v) < 2 for v in langs_by_id.values()):
        return False
    for r in records:
        r["id"] = f"{r['id']}-{r['language']}"
    return True


def empty_selection(config: str, languages: Iterable[str], present: Counter[str]) -> str:
    """The message of a ``--language`` filter that leaves no record of a config."""
    have = ", ".join(f"{k} ({n})" for k, n in sorted(present.items())) or "none"
    return (
        f"{config}: --language {','.join(languages)} selects no record; the source has the language(s) {have}"
    )
