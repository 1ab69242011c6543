"""Importers: recorded conversations from other formats become threadkeep chats.

Every importer has the same shape, ``async def import_x(store, path, *, user_id,
progress=None) -> ImportReport``, and is named in :data:`IMPORTERS` by a ``"module:function"``
path that is imported only when that format is asked for, so a format whose module or
optional dependency is missing fails alone, with one clear error, and never breaks the others.

Importers are idempotent: the chat of a record and every message in it get deterministic keys
(``thread_id`` and ``agui_id``), so importing the same file again finds what is stored and
changes nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, fields
from os import PathLike
from typing import TYPE_CHECKING, Any, Protocol

from .._errors import InvalidArgument

if TYPE_CHECKING:
    from .._store import Store

__all__ = [
    "IMPORTERS",
    "UNITS",
    "ImportReport",
    "Importer",
    "ProgressCallback",
    "resolve_importer",
]

IMPORTERS: dict[str, str] = {
    "openai": "threadkeep._importers.openai:import_openai",
    "agui": "threadkeep._importers.agui:import_agui",
    "claude-code": "threadkeep._importers.claude_code:import_claude_code",
    "swe-agent": "threadkeep._importers.swe_agent:import_swe_agent",
    "openhands": "threadkeep._importers.openhands:import_openhands",
    "auto": "threadkeep._importers.auto:import_auto",
}
"""Import formats by name, each the ``"module:function"`` path of its importer."""

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(0, total)`` when writing starts (everything read and checked), then as
``progress(done, total)`` after each record (or run) is stored (counts)."""

UNITS: dict[str, str] = {
    "openai": "records",
    "agui": "runs",
    "claude-code": "chats",
    "swe-agent": "chats",
    "openhands": "chats",
    "auto": "records",
}
"""What an importer's progress counts, by format name."""


@dataclass
class ImportReport:
    """What an import did, in counts: each kind split into newly created and already present.

    "Already present" means the store held it before (an earlier import of the same file):
    it was found by its deterministic key and left unchanged.
    """

    chats_created: int = 0
    chats_present: int = 0
    messages_created: int = 0
    messages_present: int = 0
    tool_calls_created: int = 0
    tool_calls_present: int = 0

    @property
    def chats(self) -> int:
        """Chats the file holds (created + present)."""
        return self.chats_created + self.chats_present

    @property
    def messages(self) -> int:
        """Messages the file holds (created + present)."""
        return self.messages_created + self.messages_present

    @property
    def tool_calls(self) -> int:
        """Tool calls the file holds (created + present)."""
        return self.tool_calls_created + self.tool_calls_present

    def merge(self, other: ImportReport) -> None:
        """Add every count of ``other`` to this report."""
        for item in fields(self):
            setattr(self, item.name, getattr(self, item.name) + getattr(other, item.name))

    def as_dict(self) -> dict[str, int]:
        """Return the counts, totals included, as a JSON-ready mapping."""
        counts = {item.name: getattr(self, item.name) for item in fields(self)}
        return {
            "chats": self.chats,
            "messages": self.messages,
            "tool_calls": self.tool_calls,
            **counts,
        }

    def summary(self) -> str:
        """Return one human line, for example ``"200 chats (200 new, 0 already present), ..."``."""
        parts = [
            _count_phrase(self.chats_created, self.chats_present, "chats"),
            _count_phrase(self.messages_created, self.messages_present, "messages"),
            _count_phrase(self.tool_calls_created, self.tool_calls_present, "tool calls"),
        ]
        return ", ".join(parts)


def _count_phrase(created: int, present: int, noun: str) -> str:
    return f"{created + present:,} {noun} ({created:,} new, {present:,} already present)"


class Importer(Protocol):
    """The signature every importer in :data:`IMPORTERS` has."""

    def __call__(
        self,
        store: Store,
        path: str | PathLike[str],
        *,
        user_id: str,
        progress: ProgressCallback | None = None,
    ) -> Coroutine[Any, Any, ImportReport]:
        """Import the file at ``path`` into ``store`` as chats owned by ``user_id``."""
        ...


def resolve_importer(format_name: str) -> Importer:
    """Return the importer of a format, importing its module now.

    Args:
        format_name: A key of :data:`IMPORTERS`, for example ``"openai"``.

    Returns:
        The importer function.

    Raises:
        InvalidArgument: If the format is unknown (the message lists the known ones), or
            its module, or a package that module needs, is not installed.
    """
    target = IMPORTERS.get(format_name)
    if target is None:
        known = ", ".join(sorted(IMPORTERS))
        raise InvalidArgument(f"unknown import format {format_name!r}; known formats: {known}")
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            msg = (
                f"the {format_name!r} importer ({module_name}) is not available in this "
                "installation of threadkeep; upgrade threadkeep or use another --format"
            )
        else:
            msg = f"the {format_name!r} importer needs the package {exc.name!r}; install it"
        raise InvalidArgument(msg) from exc
    importer: Importer = getattr(module, attribute)
    return importer
