"""JSON text as JavaScript's ``JSON.stringify`` writes it: the exact argument string of a call.

Claude Code and OpenHands record a tool call's input as a parsed object inside the line,
and the line was written by ``JSON.stringify`` (no spaces, non-ASCII characters raw). Writing
the object back the same way gives the very text the line held, so the call's ``arguments``
are the recorded bytes, not Python's ``json.dumps`` spelling (which differs in spacing and in
numbers such as ``1e-07`` versus ``1e-7`` and ``1e-05`` versus ``0.00001``).
"""

from __future__ import annotations

import json
import math
from typing import Any

from .._errors import InvalidArgument

__all__ = ["js_number", "js_stringify"]


def js_number(value: float) -> str:
    """Spell a finite float as ECMAScript ``Number.prototype.toString`` does.

    The digits are Python's shortest round-trip digits (the same ones ECMAScript picks); only
    the layout differs: plain decimals from 1e-6 up to (not including) 1e21, exponent form
    ``d.ddde+N`` / ``de-N`` (no zero padding) outside that range.

    Args:
        value: A finite float.

    Raises:
        InvalidArgument: If ``value`` is NaN or infinite (``JSON.stringify`` writes
            ``null`` for them; a recorded line never holds them).
    """
    if not math.isfinite(value):
        raise InvalidArgument(f"{value!r} has no JSON form")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    digits, exponent = _shortest_digits(abs(value))
    # value = 0.digits * 10**exponent, ECMAScript's n is `exponent`.
    count = len(digits)
    if count <= exponent <= 21:
        return sign + digits + "0" * (exponent - count)
    if 0 < exponent <= 21:
        return sign + digits[:exponent] + "." + digits[exponent:]
    if -6 < exponent <= 0:
        return sign + "0." + "0" * (-exponent) + digits
    power = exponent - 1
    sign_of_power = "+" if power >= 0 else "-"
    head = digits[0] + ("." + digits[1:] if count > 1 else "")
    return f"{sign}{head}e{sign_of_power}{abs(power)}"


def _shortest_digits(value: float) -> tuple[str, int]:
    """Return ``(digits, n)`` with ``value == 0.digits * 10**n`` and digits the shortest."""
    text = repr(value)
    mantissa, _, exponent_text = text.partition("e")
    exponent = int(exponent_text) if exponent_text else 0
    whole, _, fraction = mantissa.partition(".")
    if fraction == "0":
        fraction = ""
    digits = (whole + fraction).lstrip("0")
    leading_zeros = len(whole + fraction) - len((whole + fraction).lstrip("0"))
    n = len(whole) - leading_zeros + exponent
    return digits.rstrip("0") or "0", n


def js_stringify(value: Any) -> str:
    r"""Return ``JSON.stringify(value)`` for a value parsed from JSON.

    Args:
        value: Dicts, lists, strings, ints, floats, booleans and ``None``, as
            :func:`json.loads` returns them (key order is kept).

    Returns:
        Compact JSON text: no spaces, non-ASCII characters raw, ``"``, ``\\`` and control
        characters escaped as ``JSON.stringify`` escapes them.

    Raises:
        InvalidArgument: If a value has no JSON form (NaN, infinity, another type).
    """
    parts: list[str] = []
    _write(value, parts)
    return "".join(parts)


def _write(value: Any, parts: list[str]) -> None:
    if value is None or isinstance(value, bool | str):
        parts.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, int):
        parts.append(str(value))
    elif isinstance(value, float):
        parts.append(js_number(value))
    elif isinstance(value, dict):
        parts.append("{")
        for index, (key, item) in enumerate(value.items()):
            if index:
                parts.append(",")
            parts.append(json.dumps(str(key), ensure_ascii=False) + ":")
            _write(item, parts)
        parts.append("}")
    elif isinstance(value, list):
        parts.append("[")
        for index, item in enumerate(value):
            if index:
                parts.append(",")
            _write(item, parts)
        parts.append("]")
    else:
        raise InvalidArgument(f"a {type(value).__name__} has no JSON form")
