"""`hostile.parse_json` (numbers checked as parsed, most walks skipped) refuses exactly
what `json.loads` then `check_json` (the full walk) refuses, with the same field and
message, and accepts the rest as the same value."""

from __future__ import annotations

import json
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from qm_admission.errors import RequestRejected
from qm_admission.validation import hostile
from qm_admission.validation.hostile import MAX_JSON_DEPTH, check_json, parse_json

AT = "service_request_payload"


def walked(text: str) -> tuple[str, Any]:
    """What the full walk says: ("ok", value), ("rejected", (field, message)) or the
    parse error's type name."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as err:
        return type(err).__name__, None
    try:
        check_json(value, AT)
    except RequestRejected as rejected:
        return "rejected", (rejected.field, rejected.message)
    return "ok", value


def parsed(text: str) -> tuple[str, Any]:
    try:
        value = parse_json(text, AT)
    except RequestRejected as rejected:
        return "rejected", (rejected.field, rejected.message)
    except (ValueError, RecursionError) as err:
        return type(err).__name__, None
    return "ok", value


def nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


HOSTILE = [
    '{"a": "x\\u0000y"}',  # NUL by escape
    '{"a\\u0000": 1}',  # in a key
    '{"a": "\\ud800"}',  # a lone surrogate by escape
    '{"a": ["ok", "\\udfff"]}',
    '{"a": 9223372036854775808}',  # int64 max + 1
    '{"a": -9223372036854775809}',
    '{"a": 1e400}',  # overflows to inf
    '{"a": -1e400}',
    '{"a": NaN}',
    '{"a": Infinity}',
    '{"a": [-Infinity]}',
    nested(MAX_JSON_DEPTH + 1),  # its deepest value one level past the limit
    '{"a": "x\x00y"}',  # raw NUL (json.loads refuses the control character)
    '{"a": "\ud800"}',  # a raw lone surrogate in the text itself
]

FINE = [
    '{"a": 9223372036854775807, "b": -9223372036854775808}',  # int64 bounds
    '{"a": 1.5e300, "b": 1e-400, "c": 0.1234567890123456789}',  # finite, long
    '{"a": "\\u00e9t\\u00e9", "b": "\\ud83d\\ude00"}',  # escapes of real characters
    '{"a": "été", "b": "日本"}',  # non-ASCII text
    '{"a": "NaN", "b": "Infinity", "c": "12345678901234567890"}',  # in strings only
    nested(MAX_JSON_DEPTH),  # its deepest value at the limit
    "[" + ",".join(["{}"] * 40) + "]",  # more brackets than the limit, all shallow
]


@pytest.mark.parametrize("text", HOSTILE + FINE)
def test_the_fast_path_says_what_the_walk_says(text: str) -> None:
    assert parsed(text) == walked(text)


def test_the_hostile_documents_are_refused_and_the_fine_ones_kept() -> None:
    assert all(parsed(t)[0] != "ok" for t in HOSTILE)
    assert all(parsed(t)[0] == "ok" for t in FINE)


def test_a_plain_payload_skips_the_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    walks: list[Any] = []
    monkeypatch.setattr(hostile, "_json_is_storable", lambda v: walks.append(v) or True)
    parse_json('{"ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 2}}', AT)
    assert walks == []
    parse_json('{"a": "\\u00e9"}', AT)  # an escape: the walk decides
    assert len(walks) == 1


_numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, -1e308, 2**63, -(2**63) - 1, 2**63 - 1]),
)
_texts = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(["\x00", "\ud800", "\udc00", "\\", '"', "é", "😀"]),
    ),
    max_size=8,
)
_scalars = st.one_of(st.none(), st.booleans(), _numbers, _texts)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(_texts, inner, max_size=4)
    ),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(_values, st.booleans())
def test_any_document_gets_the_walks_answer(value: Any, ascii_only: bool) -> None:
    """Written as a client might send it: non-ASCII escaped or raw."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert parsed(text) == walked(text)
