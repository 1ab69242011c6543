"""Plugin hooks (pluggy) and the process-wide plugin manager.

Distributions register in the entry-point group ``threadkeep``; the built-in drivers do it
the same way a third party does. Hooks return classes or observe; they never do I/O
(pluggy hooks are synchronous).

Example plugin module::

    from threadkeep import hookimpl

    @hookimpl
    def threadkeep_drivers():
        from mypkg.store import MyStore   # a threadkeep.Store subclass with schemes = ("my",)
        return [MyStore]
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

import pluggy

if TYPE_CHECKING:
    from ._models import Message

__all__ = [
    "ENTRY_POINT_GROUP",
    "hookimpl",
    "hookspec",
    "lazy_exports",
    "notify_messages_committed",
    "plugin_manager",
    "reset_plugin_manager",
]

ENTRY_POINT_GROUP = "threadkeep"
"""The entry-point group drivers and observers register in."""

hookspec = pluggy.HookspecMarker("threadkeep")
hookimpl = pluggy.HookimplMarker("threadkeep")
"""Decorator for hook implementations in a plugin module."""

_log = logging.getLogger("threadkeep.plugins")


class _HookSpecs:
    """The hooks threadkeep calls."""

    @hookspec
    def threadkeep_drivers(self) -> Sequence[type[Any]]:  # type: ignore[empty-body]
        """Return store classes (``threadkeep.Store`` subclasses) this plugin provides.

        Each class lists its URL schemes in ``schemes``. Import lazily inside the hook so
        that loading plugins stays cheap.
        """

    @hookspec
    def threadkeep_schemes(self) -> Mapping[str, Sequence[str]]:  # type: ignore[empty-body]
        """Declare, without importing anything, which URL schemes this plugin serves.

        Return ``{"threadkeep_drivers": (...schemes...), "threadkeep_archives": (...)}``.
        Optional but recommended: with it, opening a URL imports only the plugin that serves
        its scheme (drivers pull in SQLAlchemy, PyMongo, botocore...). A plugin without it
        is asked for its classes on every lookup.
        """

    @hookspec
    def threadkeep_archives(self) -> Sequence[type[Any]]:  # type: ignore[empty-body]
        """Return archive store classes (``threadkeep.typing.ArchiveStore`` implementations).

        Each class lists its URL schemes in ``schemes`` (for example ``("s3",)``).
        """

    @hookspec
    def threadkeep_messages_committed(
        self, store: Any, chat_id: UUID, messages: Sequence[Message]
    ) -> None:
        """Observe messages just committed (for example to feed a search index).

        Called after the write, in the writer's task; keep it fast and non-blocking. An
        exception is logged and swallowed: observers never fail a write.
        """


_manager: pluggy.PluginManager | None = None


def plugin_manager() -> pluggy.PluginManager:
    """Return the process-wide plugin manager, loading entry points on first use."""
    global _manager  # noqa: PLW0603 - one registry per process, like pytest's
    if _manager is None:
        manager = pluggy.PluginManager("threadkeep")
        manager.add_hookspecs(_HookSpecs)
        manager.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
        _manager = manager
    return _manager


def reset_plugin_manager() -> None:
    """Forget the plugin manager so the next use reloads entry points (tests, reloads)."""
    global _manager  # noqa: PLW0603
    _manager = None


def has_commit_observers() -> bool:
    """Whether any plugin observes committed messages (bulk paths skip building them if not)."""
    return bool(plugin_manager().hook.threadkeep_messages_committed.get_hookimpls())


def notify_messages_committed(store: Any, chat_id: UUID, messages: Sequence[Message]) -> None:
    """Call ``threadkeep_messages_committed`` observers; log and swallow their errors."""
    hook = plugin_manager().hook.threadkeep_messages_committed
    if not hook.get_hookimpls():
        return
    try:
        hook(store=store, chat_id=chat_id, messages=list(messages))
    except Exception:  # noqa: BLE001 - observers never fail a write (hookspec)
        _log.exception("a threadkeep_messages_committed observer failed; the write stands")


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """Return a module ``__getattr__`` (PEP 562) that imports public names on first use.

    A driver package's entry point is imported whenever plugins load; its heavy dependencies
    (SQLAlchemy, PyMongo, botocore) must wait until its scheme is opened. In the package's
    ``__init__``: ``__getattr__ = lazy_exports(__name__, {"SqlStore": "_store"})``.

    Args:
        package: The package's ``__name__``.
        exports: Public name -> the submodule (relative, without the dot) that defines it.

    Returns:
        ``__getattr__(name)``: imports ``package.<module>``, caches the value in the
        package's namespace and returns it.

    Raises:
        AttributeError: (from the returned function) For a name not in ``exports``.
    """

    def load(name: str) -> Any:
        if name not in exports:
            msg = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(msg)
        module = importlib.import_module(f".{exports[name]}", package)
        value = getattr(module, name)
        setattr(importlib.import_module(package), name, value)
        return value

    return load
