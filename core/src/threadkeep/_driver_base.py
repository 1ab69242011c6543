"""``DriverBase``: an optional base class with what most drivers share (not a ``Store``).

A driver does not have to subclass it: anything that implements
:class:`threadkeep.driver.Driver` plugs into :class:`threadkeep.Store`. It gives a driver
its URL, option checking, the store's row helpers once open (:attr:`records`), and an
``open`` made of two hooks, :meth:`_open` and :meth:`_load_secret`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import (
    Any,
    ClassVar,
    Concatenate,
    Generic,
    ParamSpec,
    Self,
    TypeVar,
    cast,
    overload,
)

from pydantic import BaseModel

from ._capabilities import Capabilities
from ._driver import DriverSetup
from ._errors import InvalidArgument
from ._models import Chat, Message
from ._records import Records, message_body, record_body, record_from_body, records_from_rows
from ._shielding import finish

__all__ = ["DriverBase", "check_options"]

R = TypeVar("R", bound=BaseModel)
P = ParamSpec("P")
T = TypeVar("T")


class _FromRecords(Generic[P, T]):
    """A method of :class:`~threadkeep.driver.Records`, called on a driver's ``records``.

    ``driver.message_from_row(...)`` is ``driver.records.message_from_row(...)``: one
    definition (in ``Records``), typed and documented there, and no forwarding copy.
    """

    def __init__(self, method: Callable[Concatenate[Records, P], T]) -> None:
        self._name = method.__name__
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, driver: None, owner: type[Any]) -> Self: ...

    @overload
    def __get__(self, driver: DriverBase, owner: type[Any] | None = None) -> Callable[P, T]: ...

    def __get__(
        self, driver: DriverBase | None, owner: type[Any] | None = None
    ) -> Self | Callable[P, T]:
        if driver is None:
            return self
        return cast("Callable[P, T]", getattr(driver.records, self._name))


def check_options(driver_class: type, build: Any, url: str, options: Mapping[str, Any]) -> None:
    """Refuse options that ``build(url, **options)`` does not take, before calling it.

    Args:
        driver_class: The driver class, named in the message.
        build: Its constructor or ``from_url``.
        url: The URL.
        options: The driver's options.

    Raises:
        InvalidArgument: Naming the options, when the signature refuses them.
    """
    try:
        inspect.signature(build).bind(url, **options)
    except TypeError:
        msg = (
            f"unknown option(s) {sorted(options)} for {driver_class.__name__}; the common "
            "ones are cursor_secret, clock, max_message_bytes, message_model and "
            "chat_model (see the driver's documentation for its own)"
        )
        raise InvalidArgument(msg) from None


class DriverBase:
    """URL, options, lifecycle hooks and row helpers shared by drivers (optional).

    Args:
        url: The store URL (one of :attr:`schemes`).
        **unknown: Options the driver's constructor did not take: refused.

    Raises:
        InvalidArgument: If an option is unknown to the driver.
    """

    schemes: ClassVar[tuple[str, ...]] = ()
    """URL schemes this driver serves, for example ``("memory",)``."""

    capabilities: ClassVar[Capabilities] = Capabilities()
    """Backend properties the contract suite checks (``steps``/``archive`` follow the code)."""

    shield_writes: ClassVar[bool] = False
    """Run write primitives to completion under cancellation (``WRITE_PRIMITIVES``).

    Set it on drivers whose writes hold connections, locks or transactions across awaits
    (SQL, MongoDB); a driver whose writes finish without yielding half-way needs nothing.
    """

    writes_run_whole: frozenset[str] = frozenset()
    """Write primitives this driver itself runs to completion under cancellation.

    ``shield_writes`` adds no shielded task around these (a task and two loop iterations
    per call, on the hottest path). A driver that names a primitive here guarantees what
    the task would: a caller cancelled mid-write gets its ``CancelledError`` only once the
    write has committed or rolled back whole (``threadkeep.driver.finish`` helps). The SQL
    driver names ``insert_messages`` on PostgreSQL, where group commit already writes in a
    task of its own.
    """

    def __init__(self, url: str, **unknown: Any) -> None:
        if unknown:
            check_options(type(self), lambda url: None, url, unknown)
        self.url = url
        self.records = Records()
        """The store's row helpers; set from :class:`DriverSetup` by :meth:`open`."""
        self.auto_migrate = True
        """May :meth:`open` upgrade the schema? (from :class:`DriverSetup`)."""

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        """Build an unopened driver for ``url``; ``open_store`` calls this.

        Raises:
            InvalidArgument: If the URL or an option is invalid for this driver.
        """
        check_options(cls, cls, url, options)
        return cls(url, **options)

    # -- lifecycle ------------------------------------------------------------------------

    async def open(self, setup: DriverSetup) -> bytes | None:
        """Connect (:meth:`_open`), then load or store the cursor secret (:meth:`_load_secret`).

        Returns:
            The persisted cursor secret, or ``None`` without a candidate.

        Raises:
            BackendUnavailable: If the backend cannot be reached (closed again then).
        """
        self.records = setup.records
        self.auto_migrate = setup.auto_migrate
        await self._open()
        if setup.secret_candidate is None:
            return None
        try:
            loading = self._load_secret(setup.secret_candidate)
            return await (finish(loading) if self.shield_writes else loading)
        except BaseException:
            await self._close()
            raise

    async def close(self) -> None:
        """Release connections (:meth:`_close`)."""
        await self._close()

    async def _open(self) -> None:
        """Connect, create or migrate the schema (a hook of :meth:`open`)."""

    async def _close(self) -> None:
        """Release connections (a hook of :meth:`close`); must not raise."""

    async def _load_secret(self, candidate: bytes) -> bytes:
        """Return the persisted cursor secret, storing ``candidate`` if there is none.

        Atomic insert-if-absent. This default persists nothing (a store in memory).
        """
        return candidate

    # -- row helpers (the store's models) -------------------------------------------------

    @property
    def message_model(self) -> type[Message]:
        """The store's ``Message`` subclass."""
        return self.records.message_model

    @property
    def chat_model(self) -> type[Chat]:
        """The store's ``Chat`` subclass."""
        return self.records.chat_model

    # The row helpers of the store's models: Records' own methods, reached through the
    # current ``records`` (replaced at open), with their signatures and docstrings.
    message_from_row = _FromRecords(Records.message_from_row)
    messages_from_rows = _FromRecords(Records.messages_from_rows)
    prepare = _FromRecords(Records.prepare)

    message_body = staticmethod(message_body)
    record_body = staticmethod(record_body)
    record_from_body = staticmethod(record_from_body)
    records_from_rows = staticmethod(records_from_rows)

    @staticmethod
    def fingerprint(message: Message) -> str:
        """:func:`threadkeep.driver.fingerprint`."""
        return Records.fingerprint(message)
