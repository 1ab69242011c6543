"""A JSON document read an item at a time gives what ``json.loads`` of the whole text gives."""

from __future__ import annotations

import io
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from threadkeep._importers import _jsonstream
from threadkeep._importers._jsonstream import JsonReader, JsonStreamError

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=False),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=12),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)


@pytest.fixture(autouse=True)
def tiny_chunks(monkeypatch):
    """Seven-byte reads: every value, escape and UTF-8 sequence is cut somewhere."""
    monkeypatch.setattr(_jsonstream, "_CHUNK", 7)


def _items(data: bytes) -> list[_jsonstream.JsonItem]:
    reader = JsonReader(io.BytesIO(data))
    items = list(reader.array_items())
    reader.end()
    return items


def _same(left: object, right: object) -> bool:
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


@settings(max_examples=150, deadline=None)
@given(values=st.lists(_VALUES, max_size=6), pretty=st.booleans(), bom=st.booleans())
def test_items_and_their_byte_spans_equal_json_loads(values, pretty, bom):
    text = json.dumps(values, indent=2 if pretty else None, ensure_ascii=False)
    data = (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8")
    items = _items(data)
    assert _same([item.value for item in items], json.loads(text))
    for item in items:  # each span holds exactly its item's text
        assert _same(json.loads(data[item.start : item.end]), item.value)


def test_the_values_json_loads_gives_and_other_parsers_do_not():
    text = (
        r'[{"pair": "\ud83d\ude00", "lone": "\ud800", "low": "\udc00x"},'
        r" 123456789012345678901234567890123, 1e400, -1e400, NaN, Infinity, -Infinity,"
        r' {"a": 1, "a": 2}, 1.5, -0.0, 1E2]'
    )
    values = [item.value for item in _items(text.encode())]
    assert values[0] == {"pair": "\U0001f600", "lone": "\ud800", "low": "\udc00x"}
    assert values[1] == 123456789012345678901234567890123
    assert values[2:4] == [math.inf, -math.inf]
    assert math.isnan(values[4])
    assert values[5:7] == [math.inf, -math.inf]
    assert values[7] == {"a": 2}
    assert values[8:] == [1.5, -0.0, 100.0]
    assert type(values[8]) is float


@pytest.mark.parametrize(
    "text",
    [
        '[{"type": "A"},\n {"type": "B"},]',
        '[{"type": "A"}\n {"type": "B"}]',
        '[{"type": "A"}, {"type": "B"',
        '[{"type": "A"}, {"type": "B\\x"}]',
        '[{"type": "A"}] [2]',
        "[1, 2",
        '[{"type": "A", 3: 4}]',
        '[{"type" "A"}]',
        "[tru]",
    ],
)
def test_a_syntax_error_is_placed_where_json_loads_places_it(text):
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    with pytest.raises(JsonStreamError) as got:
        _items(text.encode())
    assert (got.value.reason, got.value.line, got.value.column) == (
        expected.value.msg,
        expected.value.lineno,
        expected.value.colno,
    )
    assert got.value.offset == len(text[: expected.value.pos].encode())


def test_an_error_names_the_item_it_is_in():
    text = '[{"type": "A"}, {"type": "B"}, {"type": "C" "x"}]'
    with pytest.raises(JsonStreamError) as got:
        _items(text.encode())
    assert got.value.index == 2
    assert got.value.where() == ("Expecting ',' delimiter at line 1 column 45 (byte 44, item 2)")


def test_bytes_that_are_not_utf8_are_an_error_with_their_offset():
    data = b'[{"type": "A"}, {"type": "\xff"}]'
    with pytest.raises(JsonStreamError) as got:
        _items(data)
    assert got.value.where() == "not UTF-8 text at byte 26, item 1"


def test_a_value_larger_than_many_chunks_is_read_whole():
    big = "x" * 10_000 + "é" * 3_000
    data = json.dumps([{"a": big}, 12345678901234567890], ensure_ascii=False).encode()
    items = _items(data)
    assert [item.value for item in items] == [{"a": big}, 12345678901234567890]
    assert items[1].end == len(data) - 1


def test_object_members_and_a_span_read_again():
    data = b'{"one": [{"type": "A"}, {"type": "B"}], "two": [{"type": "C"}]}'
    reader = JsonReader(io.BytesIO(data))
    seen: dict[str, list[_jsonstream.JsonItem]] = {}
    for key in reader.object_keys():
        seen[key] = list(reader.array_items())
    reader.end()
    assert {k: [i.value for i in v] for k, v in seen.items()} == json.loads(data)
    second = seen["one"][1]
    again = JsonReader(io.BytesIO(data), start=seen["one"][0].start)
    assert [i.value for i in again.items_between(second.end)] == json.loads(data)["one"]
