"""Seed contexts of the MEDAL pipeline (App. C.1): scene × persona (+ gender) × affective state × language.

* **Scenes** are Atomic10x-style triples in their templated sentence form (:func:`atomic_sentence`,
  e.g. ``PersonX is made aware. Now PersonX wants to find out more.``) or free-text scene lines
  (:func:`load_scenes`; a small hand-written set is packaged as ``data/scenes.jsonl``).
* **Personas** come from PersonaHub (:func:`load_personas`).
* **Affective state**: when keyword matching (:func:`detect_affect`) finds none in the scene, one is
  sampled from :data:`AFFECTIVE_STATES` (low-arousal states, equally many per circumplex quadrant),
  balancing the quadrants, and ``PersonX is <state>.`` is appended to the scene.
* **Gender**: by default only gender-neutral scenes (:func:`detect_gender`) are used and a binary
  gender class is sampled for them.

:func:`sample_seed_contexts` crosses each sampled context with every language; it is deterministic
given its inputs and ``seed``.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataset_builders.helpers import open_rows, pick_field, text_value
from dataset_builders.medal_pipeline.types import SeedContext, stable_id

# -- affective states ----------------------------------------------------------------------------

#: Circumplex quadrant (Russell, 1980) -> low-arousal states, the same number in each quadrant.
#: Every state reads well in ``PersonX is <state>.``
AFFECTIVE_STATES: dict[str, tuple[str, ...]] = {
    "positive-activated": ("pleased", "glad", "happy", "interested"),
    "negative-activated": ("annoyed", "frustrated", "worried", "tense"),
    "negative-deactivated": ("sad", "disappointed", "bored", "gloomy"),
    "positive-deactivated": ("calm", "content", "relaxed", "serene"),
}

_AFFECT_WORDS = """
happy happier happiest glad pleased delighted joyful joyous cheerful content contented satisfied
fulfilled calm calmer calmest relaxed serene peaceful tranquil carefree relieved grateful thankful
hopeful optimistic proud excited thrilled elated ecstatic euphoric enthusiastic eager amused
interested curious inspired motivated confident loved affectionate comfortable touched surprised
amazed astonished awed nostalgic sentimental blissful gleeful jubilant exhilarated giddy
sad sadder saddest unhappy sorrowful gloomy miserable depressed heartbroken grieving lonely lonelier
loneliest homesick disappointed discouraged hopeless helpless bored tired sleepy exhausted fatigued
weary drained lethargic melancholy melancholic dejected despondent upset hurt
angry angrier angriest mad furious annoyed irritated frustrated aggravated resentful bitter jealous
envious hostile outraged enraged irate
nervous anxious worried scared afraid frightened terrified fearful panicked panicky alarmed tense
stressed overwhelmed uneasy uncomfortable restless insecure shy embarrassed ashamed guilty humiliated
awkward distressed disgusted disturbed troubled confused puzzled shocked startled horrified regretful
remorseful sorry jittery apprehensive impatient sympathetic
happiness joy sadness sorrow grief fear anger rage anxiety excitement relief pride shame guilt
gratitude embarrassment jealousy envy loneliness frustration boredom disappointment
"""
_AFFECT_PHRASES = (
    "at ease",
    "on edge",
    "fed up",
    "feel good",
    "feels good",
    "felt good",
    "feel bad",
    "feels bad",
    "felt bad",
)

#: Affective-state keywords (lower case) for :func:`detect_affect`; includes every state of
#: :data:`AFFECTIVE_STATES`. Single words match on word boundaries; phrases on any whitespace.
AFFECT_KEYWORDS: frozenset[str] = frozenset(
    [*_AFFECT_WORDS.split(), *_AFFECT_PHRASES, *(s for states in AFFECTIVE_STATES.values() for s in states)]
)
_AFFECT_RE = re.compile(
    r"\b(?:"
    + "|".join(r"\s+".join(map(re.escape, k.split())) for k in sorted(AFFECT_KEYWORDS, key=len, reverse=True))
    + r")\b",
    re.IGNORECASE,
)


def detect_affect(text: str) -> str | None:
    """The first (leftmost) affect keyword in ``text`` (lower case), or None when there is none."""
    if not isinstance(text, str):
        raise TypeError(f"detect_affect expects a string, got {type(text).__name__}")
    m = _AFFECT_RE.search(text)
    return " ".join(m.group(0).lower().split()) if m else None


# -- gender --------------------------------------------------------------------------------------

_MALE = frozenset(
    """he him his himself man men boy boys father fathers dad dads daddy husband husbands son sons
    brother brothers uncle uncles nephew nephews grandfather grandpa grandson grandsons mr sir king
    prince gentleman gentlemen boyfriend fiance stepfather stepson stepbrother male males""".split()
)
_FEMALE = frozenset(
    """she her hers herself woman women girl girls mother mothers mom moms mum mums mommy wife wives
    daughter daughters sister sisters aunt aunts niece nieces grandmother grandma granddaughter
    granddaughters mrs ms madam queen princess lady ladies girlfriend fiancee stepmother stepdaughter
    stepsister female females""".split()
)
_WORD_RE = re.compile(r"[a-z]+")


def detect_gender(text: str) -> str | None:
    """Rule-based gender of a text: ``"male"`` / ``"female"`` when only male / female markers
    (pronouns, kinship terms, titles, ...) occur, ``"mixed"`` when both do, None when neither does
    (the text is gender-neutral). Case-insensitive, whole words only."""
    if not isinstance(text, str):
        raise TypeError(f"detect_gender expects a string, got {type(text).__name__}")
    words = set(_WORD_RE.findall(text.lower()))
    male, female = bool(words & _MALE), bool(words & _FEMALE)
    if male and female:
        return "mixed"
    return "male" if male else "female" if female else None


# -- Atomic10x templates -------------------------------------------------------------------------

#: Atomic10x relation -> templated sentence (``{head}``/``{tail}`` have no trailing period). The
#: ``o*`` relations (effects on others) name the other participant ``PersonY``.
ATOMIC_TEMPLATES: dict[str, str] = {
    "xWant": "{head}. Now PersonX wants {tail}.",
    "xReact": "{head}. PersonX feels {tail}.",
    "xAttr": "{head}. PersonX is {tail}.",
    "xEffect": "{head}. As a result, PersonX {tail}.",
    "xIntent": "{head} because PersonX wanted {tail}.",
    "xNeed": "Before that, PersonX needed {tail}. {head}.",
    "xReason": "{head} because {tail}.",
    "oReact": "{head}. As a result, PersonY feels {tail}.",
    "oWant": "{head}. As a result, PersonY wants {tail}.",
    "oEffect": "{head}. As a result, PersonY {tail}.",
    "HinderedBy": "{head}. This can be hindered if {tail}.",
    "isAfter": "{head}. This happens after {tail}.",
    "isBefore": "{head}. This happens before {tail}.",
    "HasSubEvent": "{head}. This includes: {tail}.",
    "Causes": "{head}. This causes {tail}.",
}
_RELATIONS_CI = {r.lower(): r for r in ATOMIC_TEMPLATES}


def canonical_relation(relation: str) -> str:
    """The :data:`ATOMIC_TEMPLATES` key for ``relation`` (case-insensitive); ValueError if unknown."""
    rel = _RELATIONS_CI.get(str(relation).strip().lower())
    if rel is None:
        raise ValueError(f"unknown Atomic relation {relation!r}; known: {', '.join(ATOMIC_TEMPLATES)}")
    return rel


def _clean(part: str) -> str:
    return " ".join(str(part).split()).rstrip(".").rstrip()


def atomic_sentence(head: str, relation: str, tail: str) -> str:
    """An Atomic10x triple in templated sentence form, e.g. ``("PersonX is made aware", "xWant",
    "to find out more")`` -> ``"PersonX is made aware. Now PersonX wants to find out more."``"""
    h, t = _clean(head), _clean(tail)
    if not h or not t:
        raise ValueError(f"empty {'tail' if h else 'head'} in Atomic triple {(head, relation, tail)!r}")
    return ATOMIC_TEMPLATES[canonical_relation(relation)].format(head=h, tail=t)


# -- sources -------------------------------------------------------------------------------------

BUILTIN_SCENES = Path(__file__).parent / "data" / "scenes.jsonl"
#: PersonaHub on the Hugging Face Hub (text field ``persona``); needs network access.
DEFAULT_PERSONA_SOURCE = "hf:proj-persona/PersonaHub:persona"
_TEXT_FIELDS = ("scene", "text", "sentence")
_PERSONA_FIELDS = ("input persona", "persona", "text")
_ATOMIC_FIELDS = ("head", "relation", "tail")


@dataclass(frozen=True)
class Scene:
    """A scene description. ``source``: ``"builtin"``, ``"hf:org/name[:config]"`` or the file name."""

    id: str
    text: str
    source: str
    relation: str | None = None


@dataclass(frozen=True)
class Persona:
    """A persona description (PersonaHub). ``source`` as for :class:`Scene`."""

    id: str
    text: str
    source: str


def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be None or a non-negative integer, got {limit!r}")


def load_scenes(
    source: str | None = None, *, field: str | None = None, split: str = "train", limit: int | None = None
) -> list[Scene]:
    """Load scene descriptions.

    ``source``: None or ``"builtin"`` (the packaged ``data/scenes.jsonl``), a local ``.jsonl`` /
    ``.json`` (array) / ``.csv`` / ``.tsv`` / ``.txt`` (one scene per line) file, or
    ``hf:org/name[:config]`` (``datasets.load_dataset(..., split=split)``; SourceUnavailableError
    when it cannot be loaded, e.g. offline).

    A record is Atomic-style (``head``, ``relation``, ``tail`` -> :func:`atomic_sentence`) or has a
    text field: ``field``, else the first of ``scene``, ``text``, ``sentence``. The id is the
    record's ``id`` when non-empty, else ``stable_id("scene", text)``. A bad record (empty text,
    missing head/tail, unknown relation, duplicate id -- so also a duplicate text without explicit
    ids) raises DataValidationError naming the file, the 1-based row and the field. ``limit``
    keeps the first N scenes.
    """
    _check_limit(limit)
    if source is None or source == "builtin":
        rows = open_rows(str(BUILTIN_SCENES), split=split, kind="scene")
        rows.name = "builtin"
    else:
        rows = open_rows(str(source), split=split, kind="scene")
    out: list[Scene] = []
    seen: dict[str, int] = {}
    for rownum, rec in rows.rows:
        if limit is not None and len(out) >= limit:
            break
        relation: str | None = None
        explicit_id: str | None = None
        if isinstance(rec, str):
            text_field, text = "text", " ".join(rec.split())
        elif not isinstance(rec, Mapping):
            raise rows.error(rownum, "<record>", f"expected an object or a string, got {type(rec).__name__}")
        elif field is None and any(k in rec for k in _ATOMIC_FIELDS):
            head, rel, tail = (text_value(rows, rownum, rec, k) for k in _ATOMIC_FIELDS)
            try:
                relation = canonical_relation(rel)
            except ValueError as e:
                raise rows.error(rownum, "relation", str(e)) from None
            if tail.lower() == "none":
                raise rows.error(rownum, "tail", "tail is 'none' (no inference to describe)")
            text_field, text = "head", atomic_sentence(head, relation, tail)
        else:
            text_field = pick_field(rows, rownum, rec, (field,) if field else _TEXT_FIELDS)
            text = text_value(rows, rownum, rec, text_field)
            given = rec.get("relation")
            relation = given if isinstance(given, str) and given.strip() else None
        if isinstance(rec, Mapping) and rec.get("id") not in (None, ""):
            explicit_id = str(rec["id"]).strip()
        if not text:
            raise rows.error(rownum, text_field, "empty text")
        sid = explicit_id or stable_id("scene", text)
        if sid in seen:
            what = f"duplicate id {sid!r}" if explicit_id else "duplicate scene text"
            raise rows.error(
                rownum,
                "id" if explicit_id else text_field,
                f"{what} (first seen on {rows.row_label} {seen[sid]}); scene ids must be unique",
            )
        seen[sid] = rownum
        out.append(Scene(sid, text, rows.name, relation))
    return out


def load_personas(
    source: str | None = None, *, field: str | None = None, split: str = "train", limit: int | None = None
) -> list[Persona]:
    """Load persona descriptions (PersonaHub).

    ``source``: None means :data:`DEFAULT_PERSONA_SOURCE` (``hf:proj-persona/PersonaHub:persona``,
    needs network; offline -> SourceUnavailableError); else a local ``.jsonl`` / ``.json`` /
    ``.csv`` / ``.tsv`` / ``.txt`` file (e.g. a PersonaHub JSONL such as ``tool.jsonl``) or another
    ``hf:`` source. ``field``: the persona text field; None tries ``input persona`` (PersonaHub
    synthesis subsets), then ``persona`` (the ``persona`` config), then ``text``. Ids are
    ``stable_id("persona", text)``. Duplicate persona texts are dropped (the first is kept);
    an empty or missing text raises DataValidationError. ``limit`` keeps the first N personas.
    """
    _check_limit(limit)
    rows = open_rows(DEFAULT_PERSONA_SOURCE if source is None else str(source), split=split, kind="persona")
    candidates = (field,) if field else _PERSONA_FIELDS
    out: list[Persona] = []
    seen: set[str] = set()
    for rownum, rec in rows.rows:
        if limit is not None and len(out) >= limit:
            break
        if isinstance(rec, str):
            text = " ".join(rec.split())
        elif isinstance(rec, Mapping):
            text = text_value(rows, rownum, rec, pick_field(rows, rownum, rec, candidates))
        else:
            raise rows.error(rownum, "<record>", f"expected an object or a string, got {type(rec).__name__}")
        if text in seen:
            continue
        seen.add(text)
        out.append(Persona(stable_id("persona", text), text, rows.name))
    return out


# -- sampling ------------------------------------------------------------------------------------

_LANGUAGE_RE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")


def _check_languages(languages: Sequence[str]) -> list[str]:
    if isinstance(languages, str):
        raise ValueError(f"languages must be a sequence of ISO 639 codes, not the string {languages!r}")
    langs = list(languages)
    if not langs:
        raise ValueError("languages is empty; give at least one ISO 639 code (e.g. 'en')")
    for lang in langs:
        if not isinstance(lang, str) or not _LANGUAGE_RE.match(lang):
            raise ValueError(f"invalid language code {lang!r}; expected an ISO 639 code, e.g. 'en', 'pt-BR'")
    dup = [lang for lang, n in Counter(langs).items() if n > 1]
    if dup:
        raise ValueError(f"duplicate language code(s): {', '.join(dup)}")
    return langs


def _balanced_quadrants(rng: random.Random, k: int) -> list[str]:
    """``k`` quadrants in shuffled rounds of all four, so that their counts differ by at most 1."""
    out: list[str] = []
    while len(out) < k:
        block = list(AFFECTIVE_STATES)
        rng.shuffle(block)
        out.extend(block)
    return out[:k]


def _pick_personas(rng: random.Random, personas: Sequence[Persona], k: int) -> list[Persona]:
    """``k`` personas, without replacement while possible (then in further shuffled rounds)."""
    out: list[Persona] = []
    while len(out) < k:
        out.extend(rng.sample(list(personas), min(len(personas), k - len(out))))
    return out


def sample_seed_contexts(
    scenes: Sequence[Scene],
    personas: Sequence[Persona],
    languages: Sequence[str],
    n_scenes: int,
    *,
    seed: int = 0,
    neutral_scenes_only: bool = True,
    genders: Sequence[str] = ("female", "male"),
) -> list[SeedContext]:
    """Sample ``n_scenes`` seed contexts and cross each with every language (MEDAL App. C.1).

    With ``random.Random(seed)``: ``n_scenes`` distinct scenes (only gender-neutral ones when
    ``neutral_scenes_only``, as MEDAL does); a persona per scene (without replacement while
    possible); for scenes without an affect keyword, an affective state whose circumplex quadrants
    are balanced (counts differ by at most 1), appended as ``PersonX is <state>.``; for
    gender-neutral scenes with a gender-neutral persona, a gender from ``genders`` (gendered scenes
    get ``gender=None`` and ``scene_gender`` = the detected ``male``/``female``/``mixed``).

    Returns ``n_scenes × len(languages)`` contexts, scene-major then language order. Raises
    ValueError for bad arguments, e.g. fewer eligible scenes than ``n_scenes``.
    """
    langs = _check_languages(languages)
    if isinstance(n_scenes, bool) or not isinstance(n_scenes, int) or n_scenes < 1:
        raise ValueError(f"n_scenes must be a positive integer, got {n_scenes!r}")
    if not personas:
        raise ValueError("no personas to sample from")
    if isinstance(genders, str) or not genders or not all(isinstance(g, str) and g for g in genders):
        raise ValueError(f"genders must be a non-empty sequence of non-empty strings, got {genders!r}")
    ids = Counter(s.id for s in scenes)
    if dup := [i for i, n in ids.items() if n > 1]:
        raise ValueError(f"duplicate scene id(s): {', '.join(dup[:5])}")
    pool = [s for s in scenes if not neutral_scenes_only or detect_gender(s.text) is None]
    if len(pool) < n_scenes:
        which = "gender-neutral scenes" if neutral_scenes_only else "scenes"
        raise ValueError(
            f"n_scenes={n_scenes} but only {len(pool)} {which} are available (of {len(scenes)} scenes given)"
        )

    rng = random.Random(seed)
    chosen = rng.sample(pool, n_scenes)
    chosen_personas = _pick_personas(rng, personas, n_scenes)
    own_affect = [detect_affect(s.text) for s in chosen]
    quadrants = iter(_balanced_quadrants(rng, sum(a is None for a in own_affect)))

    out: list[SeedContext] = []
    for scene, persona, scene_affect in zip(chosen, chosen_personas, own_affect, strict=True):
        text, state, quadrant = scene.text.strip(), None, None
        if scene_affect is None:
            quadrant = next(quadrants)
            state = rng.choice(AFFECTIVE_STATES[quadrant])
            if not text.endswith((".", "!", "?")):
                text += "."
            text = f"{text} PersonX is {state}."
        scene_gender = detect_gender(scene.text)
        gender = None
        if scene_gender is None and detect_gender(persona.text) is None:
            gender = rng.choice(list(genders))
        for lang in langs:
            out.append(
                SeedContext(
                    id=stable_id("seed", scene.id, persona.id, state, gender, lang),
                    scene_id=scene.id,
                    scene=text,
                    scene_source=scene.source,
                    persona_id=persona.id,
                    persona=persona.text,
                    persona_source=persona.source,
                    language=lang,
                    affective_state=state,
                    affect_quadrant=quadrant,
                    scene_affect=scene_affect,
                    gender=gender,
                    scene_gender=scene_gender,
                )
            )
    return out


def seed_summary(contexts: Iterable[SeedContext]) -> dict[str, Any]:
    """Counts for the dataset card. ``contexts`` and ``languages`` (contexts per language) count
    contexts; everything else counts scenes (the first context of each scene id)."""
    contexts = list(contexts)
    per_scene: dict[str, SeedContext] = {}
    for c in contexts:
        per_scene.setdefault(c.scene_id, c)
    firsts = list(per_scene.values())
    quadrants = Counter(c.affect_quadrant for c in firsts if c.affect_quadrant)
    states = Counter(c.affective_state for c in firsts if c.affective_state)
    return {
        "contexts": len(contexts),
        "scenes": len(firsts),
        "personas": len({c.persona_id for c in contexts}),
        "languages": dict(sorted(Counter(c.language for c in contexts).items())),
        "affect_quadrants": {q: quadrants.get(q, 0) for q in AFFECTIVE_STATES},
        "affective_states": dict(sorted(states.items())),
        "scenes_with_own_affect": sum(c.scene_affect is not None for c in firsts),
        "genders": dict(sorted(Counter(c.gender or "unspecified" for c in firsts).items())),
        "scene_genders": dict(sorted(Counter(c.scene_gender or "neutral" for c in firsts).items())),
    }
