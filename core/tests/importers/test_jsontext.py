"""Tool-call arguments recorded as objects are written back as ``JSON.stringify`` wrote them."""

from __future__ import annotations

import json

import pytest

from threadkeep import InvalidArgument
from threadkeep._importers._jsontext import js_number, js_stringify


@pytest.mark.parametrize(
    ("value", "expected"),
    [  # what Number.prototype.toString gives in ECMAScript
        (0.0, "0"),
        (-0.0, "0"),
        (1.5, "1.5"),
        (100.0, "100"),
        (0.1, "0.1"),
        (0.000001, "0.000001"),
        (0.00001, "0.00001"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (123456789012345680000.0, "123456789012345680000"),
        (1e21, "1e+21"),
        (1.2345e25, "1.2345e+25"),
        (-2.5e-10, "-2.5e-10"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
    ],
)
def test_numbers_are_spelled_as_javascript_does(value, expected):
    assert js_number(value) == expected


def test_a_line_written_by_json_stringify_comes_back_byte_for_byte():
    # The input object of a tool_use block, as Claude Code's line holds it.
    text = (
        '{"path":"/tmp/é 😀","n":[1,2.5,-0.00001,1e-7,1e+21],"deep":{"a":null,"b":true},'
        '"ctl":"\\u0001\\b\\f\\n\\r\\t\\"\\\\","sep":"\u2028","empty":{},"list":[]}'
    )
    assert js_stringify(json.loads(text)) == text


@pytest.mark.parametrize("value", [float("nan"), float("inf"), {"x": object()}])
def test_values_without_json_form_are_refused(value):
    with pytest.raises(InvalidArgument):
        js_stringify(value)
