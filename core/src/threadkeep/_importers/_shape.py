"""Turning a converter's surprise at a record's shape into ``InvalidArgument``.

The converters read records as their formats describe them and check the fields they
depend on, but a field of another JSON type somewhere deep (a ``type`` that is an object,
a ``message`` that is ``true``, an item list that is a number) can still reach code that
expects the documented type and raise ``TypeError``, ``AttributeError``, ``KeyError`` or
``IndexError``. Such a file is malformed input, not a bug of threadkeep: the import is
refused with one line naming the file (and record), before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .._errors import InvalidArgument, ThreadkeepError

__all__ = ["SHAPE_ERRORS", "shape_checked"]

SHAPE_ERRORS = (TypeError, AttributeError, KeyError, IndexError, ValueError)
"""What reading a field of an unexpected JSON type raises in plain Python code."""


@contextmanager
def shape_checked(where: str) -> Iterator[None]:
    """Run a conversion, refusing a record whose fields are not of the format's types.

    Args:
        where: The file and record, for the message (``"s.jsonl"``, ``"a.json: record 2"``).

    Raises:
        InvalidArgument: For a :data:`SHAPE_ERRORS` raised inside the block (chained);
            a ``ThreadkeepError`` passes unchanged.
    """
    try:
        yield
    except ThreadkeepError:
        raise
    except SHAPE_ERRORS as exc:
        detail = f"{type(exc).__name__}: {exc}"
        msg = f"{where}: a field does not have the type the format gives it ({detail})"
        raise InvalidArgument(msg) from exc
