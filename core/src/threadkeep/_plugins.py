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
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

import pluggy

from ._errors import InvalidArgument

if TYPE_CHECKING:
    from ._models import Message

__all__ = [
    "ENTRY_POINT_GROUP",
    "OBSERVER_HOOKS",
    "hookimpl",
    "hookspec",
    "lazy_exports",
    "notify_messages_committed",
    "plugin_manager",
    "register_observer",
    "reset_plugin_manager",
    "unregister_observer",
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


OBSERVER_HOOKS = ("threadkeep_messages_committed",)
"""The hooks an observer registered at run time (:func:`register_observer`) may implement."""

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


def register_observer(observer: object) -> None:
    """Register an observer at run time; its hooks are called from now on, in this process.

    The entry point group ``threadkeep`` registers plugins when the process starts; this is
    the same thing for an object an application builds itself (a search index, a metrics
    counter). Observers are called after the write committed, in the writer's task, and
    never fail it (see ``threadkeep_messages_committed``)::

        class Counter:
            seen = 0

            @threadkeep.hookimpl
            def threadkeep_messages_committed(self, store, chat_id, messages):
                self.seen += len(messages)

        threadkeep.register_observer(counter := Counter())

    Args:
        observer: An object (instance, class or module) with at least one method named after
            a hook of :data:`OBSERVER_HOOKS`, decorated with :data:`hookimpl`. A method may
            take any subset of the hook's arguments (``store``, ``chat_id``, ``messages``).

    Raises:
        InvalidArgument: If ``observer`` has no decorated observer hook, names a hook that
            is not an observer hook (drivers register through entry points), takes an
            argument the hook does not pass, is an ``async def`` (hooks are synchronous),
            or is registered already. Nothing is registered then.
    """
    manager = plugin_manager()
    hooks = _decorated_hooks(manager, observer)
    if not hooks:
        msg = (
            f"{observer!r} has no method decorated with @threadkeep.hookimpl named "
            f"{' or '.join(OBSERVER_HOOKS)}"
        )
        raise InvalidArgument(msg)
    for name, function in hooks.items():
        if name not in OBSERVER_HOOKS:
            msg = f"{name!r} is not an observer hook ({', '.join(OBSERVER_HOOKS)})"
            raise InvalidArgument(msg + "; drivers register through the 'threadkeep' entry points")
        if inspect.iscoroutinefunction(function):
            msg = f"{name} of {observer!r} is async def; hooks are called synchronously"
            raise InvalidArgument(msg + " (hand the work to a task or queue from a plain def)")
    if manager.is_registered(observer):
        raise InvalidArgument(f"{observer!r} is registered already")
    try:
        manager.register(observer)
    except pluggy.PluginValidationError as exc:
        raise InvalidArgument(f"{observer!r} does not fit its hook: {exc}") from exc


def unregister_observer(observer: object) -> bool:
    """Stop calling an observer registered by :func:`register_observer`.

    Args:
        observer: The object given to :func:`register_observer`.

    Returns:
        ``True`` if it was registered, ``False`` if it was not (nothing changes then).
    """
    manager = plugin_manager()
    if not manager.is_registered(observer):
        return False
    manager.unregister(observer)
    return True


def _decorated_hooks(manager: pluggy.PluginManager, observer: object) -> dict[str, Any]:
    """Return ``{hook name: function}`` for the ``@hookimpl`` methods of ``observer``."""
    found: dict[str, Any] = {}
    for name in dir(observer):
        if name.startswith("threadkeep_") and manager.parse_hookimpl_opts(observer, name):
            found[name] = getattr(observer, name)
    return found


def notify_messages_committed(store: Any, chat_id: UUID, messages: Sequence[Message]) -> None:
    """Call ``threadkeep_messages_committed`` observers; log and swallow their errors.

    Each observer is called on its own, newest first (pluggy's order), so one that raises
    costs the others nothing; they get deep copies of the messages, so one that changes
    them changes neither what the writer returns nor what the next observer sees.
    A wrapper implementation (``wrapper=True``, only possible through an entry point) needs
    pluggy's call chain: the hook is then called whole, as before.
    """
    hook = plugin_manager().hook.threadkeep_messages_committed
    impls = hook.get_hookimpls()
    if not impls:
        return
    arguments = {"store": store, "chat_id": chat_id}
    if any(impl.hookwrapper or impl.wrapper for impl in impls):
        _call_observer(hook, {**arguments, "messages": _copies(messages)})
        return
    for impl in reversed(impls):  # pluggy calls the newest registration first
        given = {**arguments, "messages": _copies(messages)}
        _call_observer(impl.function, {name: given[name] for name in impl.argnames})


def _copies(messages: Sequence[Message]) -> list[Message]:
    return [message.model_copy(deep=True) for message in messages]


def _call_observer(function: Callable[..., object], arguments: Mapping[str, Any]) -> None:
    try:
        function(**arguments)
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
