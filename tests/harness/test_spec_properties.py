"""Property-based tests (hypothesis) of the judge-spec parser and the option checks:
any string is a parsed spec or a :class:`SpecError` — never another exception — and a parsed spec
survives a round trip; any option value is accepted within its range or refused naming it."""

from __future__ import annotations

import math
import string

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.options import OptionError, check_option
from harness.spec import SpecError, known_kinds, language_routes, mean_members, panel_members, parse_spec
from harness.types import GenerationConfig

# deterministic (CI): the same examples every run; no example database written into the checkout
FAST = settings(max_examples=600, deadline=None, derandomize=True, database=None)
SOME = settings(max_examples=200, deadline=None, derandomize=True, database=None)

SPEC_CHARS = string.ascii_letters + string.digits + ":,=@+;*./-_ \t|é中\x00\n"
KINDS = [*known_kinds(), "gguf", "", "HF"]
KEYS = [
    "temperature",
    "top_p",
    "top_k",
    "max_tokens",
    "seed",
    "stop",
    "logprobs",
    "top_logprobs",
    "timeout",
    "presence_penalty",
    "concurrency",
    "batch_size",
    "vote",
    "quorum",
    "api_key",
    "base_url",
    "x",
]
VALUES = st.one_of(
    st.sampled_from(
        ["0", "-1", "1e30", "1e9", "nan", "inf", "-inf", "abc", "", "true", "none", "0.5", "2", "a|b"]
    ),
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(SPEC_CHARS, max_size=8),
)


def _check_parsed(spec: str) -> None:
    try:
        js = parse_spec(spec)
    except SpecError as e:
        assert str(e) and "Traceback" not in str(e)
        return
    assert js.kind in known_kinds()
    if js.kind == "mean":
        assert len(mean_members(js)) >= 2
    elif js.kind == "panel":
        members, opts = panel_members(js)
        assert len(members) >= 2 and opts["vote"] in ("mean", "median", "majority")
        assert len({str(m) for m in members}) == len(members)  # no duplicate member
    elif js.kind == "bylang":
        assert language_routes(js)
    else:
        cfg = js.generation_config()  # every decoding value was checked at parse time
        assert cfg.max_tokens >= 1 and math.isfinite(cfg.temperature) and cfg.temperature >= 0
        again = parse_spec(js.to_string())
        assert (again.kind, again.target, again.revision) == (js.kind, js.target, js.revision)


@FAST
@given(st.text(SPEC_CHARS, max_size=60))
def test_any_text_is_a_spec_or_a_spec_error(text):
    _check_parsed(text)


@FAST
@given(
    kind=st.sampled_from(KINDS),
    target=st.text(SPEC_CHARS.replace(",", ""), max_size=20),
    options=st.lists(st.tuples(st.sampled_from(KEYS), VALUES), max_size=4),
)
def test_structured_specs_with_hostile_options(kind, target, options):
    _check_parsed(f"{kind}:{target}" + "".join(f",{k}={v}" for k, v in options))


@SOME
@given(
    kind=st.sampled_from(["mean", "panel", "bylang"]),
    members=st.lists(
        st.sampled_from(
            [
                "embed:a",
                "embed:b",
                "metric:rougeL",
                "hf:m,temperature=2",
                "mean:x+y",
                "panel:a:b+c:d",
                "bylang:en=embed:a",
                "embed:a,vote=mean",
                "",
                "hf:m,top_p=0",
            ]
        ),
        max_size=4,
    ),
    tail=st.sampled_from(["", ",vote=median", ",vote=bogus", ",quorum=1", ",quorum=9", ",quorum=abc"]),
    codes=st.lists(st.sampled_from(["en", "de", "*", "zz-Latn", "EN", "e", "pt-BR"]), min_size=1, max_size=4),
)
def test_composite_specs(kind, members, tail, codes):
    if kind == "bylang":
        spec = "bylang:" + ";".join(f"{c}={m}" for c, m in zip(codes, members, strict=False))
    else:
        spec = f"{kind}:" + "+".join(members) + tail
    _check_parsed(spec)


ANY_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**80), 2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["1e3", " 7 ", "true", "Off", "nan", "1e400"]),
    st.lists(st.integers(), max_size=2),
    st.binary(max_size=4),
)


@FAST
@given(
    value=ANY_VALUE,
    kind=st.sampled_from([int, float, bool, str]),
    lo=st.one_of(st.none(), st.integers(-5, 5)),
    span=st.one_of(st.none(), st.integers(0, 10**6)),
    lo_open=st.booleans(),
    allow_none=st.booleans(),
)
def test_check_option_accepts_in_range_or_names_the_option(value, kind, lo, span, lo_open, allow_none):
    hi = None if span is None or lo is None else lo + span
    try:
        got = check_option("owner", "opt", value, kind, lo=lo, hi=hi, lo_open=lo_open, allow_none=allow_none)
    except OptionError as e:
        assert str(e).startswith("owner: option opt=") and " must be " in str(e)
        return
    if got is None:
        assert allow_none and value is None
        return
    assert isinstance(got, kind) and not (kind is int and isinstance(got, bool))
    if kind in (int, float):
        assert math.isfinite(got)
        assert lo is None or (got > lo if lo_open else got >= lo)
        assert hi is None or got <= hi


@SOME
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "temperature",
                "top_p",
                "top_k",
                "max_tokens",
                "seed",
                "logprobs",
                "top_logprobs",
                "timeout",
                "presence_penalty",
                "frequency_penalty",
            ]
        ),
        ANY_VALUE,
        max_size=4,
    )
)
def test_generation_config_is_valid_or_a_value_error(fields):
    try:
        cfg = GenerationConfig(**fields)
    except ValueError as e:
        assert str(e).startswith("decoding: option ")
        return
    assert cfg.max_tokens >= 1 and 0 < cfg.top_p <= 1 and cfg.temperature >= 0
    assert cfg.timeout is None or 0 < cfg.timeout < math.inf
    GenerationConfig.from_dict(cfg.to_dict())  # what the cache stores reads back
