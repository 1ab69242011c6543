"""The driver's one error-mapping point: ``OSError`` becomes ``BackendUnavailable``.

Every file operation of the driver runs inside :func:`map_os_errors` (in ``_log.py``, the only
module that touches files), so no ``OSError`` ever reaches a caller of ``threadkeep.Store``
(``httpx._transports.default.map_httpcore_exceptions`` is the model).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from threadkeep import BackendUnavailable

__all__ = ["map_os_errors"]


@contextlib.contextmanager
def map_os_errors(directory: Path) -> Iterator[None]:
    """Run a block of file I/O on the store ``directory``, mapping ``OSError``.

    Args:
        directory: The store's directory, named in the error message.

    Raises:
        BackendUnavailable: For any ``OSError`` in the block (permissions, a full disk, a
            file where the directory should be, an I/O error); the original is chained.
            threadkeep errors raised in the block pass through unchanged.
    """
    try:
        yield
    except OSError as exc:
        reason = exc.strerror or str(exc)
        msg = (
            f"jsonl store {directory}: {reason}; check that the directory is writable and "
            "the disk has room, then retry"
        )
        raise BackendUnavailable(msg) from exc
