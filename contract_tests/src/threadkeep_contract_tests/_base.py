"""The base every contract mixin shares: fixtures, back door, capabilities, divergences.

A driver's test class provides ``store_factory`` and the two back-door reads; this module
turns them into the ``store`` and ``capabilities`` fixtures, records what the capability
matrix needs, and runs the tests named in ``known_divergences`` as strict xfails (Google
ADK's session conformance tests: a fix makes the entry fail, so it has to go).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar
from uuid import UUID

import pytest
import pytest_asyncio

from threadkeep import Capabilities, Store

from ._raw import RawChat, RawMessage

__all__ = ["ContractBase", "StoreFactory", "contract_area", "require_capability"]

StoreFactory = Callable[..., Store]
"""``(**options) -> Store``: an unopened store on the test's storage (see ``StoreContract``)."""


def require_capability(capabilities: Capabilities, name: str) -> None:
    """Skip the calling test unless the driver declares capability ``name``.

    Raises:
        pytest.skip.Exception: With the reason "driver does not declare capability 'name'".
        AttributeError: If ``name`` is not a field of :class:`threadkeep.Capabilities`.
    """
    if not isinstance(getattr(capabilities, name), bool):
        msg = f"{name!r} is not a capability of threadkeep.Capabilities"
        raise AttributeError(msg)
    if not getattr(capabilities, name):
        pytest.skip(f"driver does not declare capability {name!r}")


def contract_area(cls: type, test_name: str) -> str:
    """Return the contract area of ``cls.test_name``: the ``contract_area`` of its mixin."""
    for klass in cls.__mro__:
        namespace = vars(klass)
        if test_name in namespace and "contract_area" in namespace:
            return str(namespace["contract_area"])
    return "other"


def _strict_xfail_copy(function: Callable[..., Any], reason: str) -> Callable[..., Any]:
    """Return a copy of a test function marked strict xfail (the original stays unmarked)."""
    wrapper: Callable[..., Any]
    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            return await function(*args, **kwargs)

    else:

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return function(*args, **kwargs)

    mark = pytest.mark.xfail(strict=True, reason=f"known divergence: {reason}")
    return mark(wrapper)  # type: ignore[no-any-return]


class ContractBase:
    """Fixtures and back door shared by the contract mixins; see ``StoreContract``."""

    known_divergences: ClassVar[dict[str, str]] = {}
    """Test name -> written reason; those tests run as strict xfail (a fix surfaces)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        divergences = vars(cls).get("known_divergences")
        if not divergences:
            return
        for name, reason in divergences.items():
            function = getattr(cls, name, None)
            if not name.startswith("test_") or not callable(function):
                msg = (
                    f"{cls.__name__}.known_divergences names {name!r}, which is not a contract test"
                )
                raise TypeError(msg)
            if not isinstance(reason, str) or not reason.strip():
                msg = f"{cls.__name__}.known_divergences[{name!r}] needs a written reason"
                raise TypeError(msg)
            setattr(cls, name, _strict_xfail_copy(function, reason))

    # -- what a driver's test class provides -------------------------------------------

    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        """Return ``(**options) -> Store``; a driver's test class must override this fixture."""
        pytest.fail(
            f"{type(self).__name__} must define a `store_factory` fixture returning "
            "`(**options) -> threadkeep.Store` (unopened, on fresh storage per test)",
            pytrace=False,
        )

    async def raw_chats(self, store: Store) -> list[RawChat]:
        """Return every stored chat, read without ``store``'s read path; drivers override.

        Raises:
            NotImplementedError: Until the driver's test class implements it.
        """
        msg = f"{type(self).__name__} must implement `async def raw_chats(self, store)`"
        raise NotImplementedError(msg)

    async def raw_messages(self, store: Store, chat_id: UUID) -> list[RawMessage]:
        """Return every stored message row of a chat (hidden ones too); drivers override.

        Raises:
            NotImplementedError: Until the driver's test class implements it.
        """
        msg = f"{type(self).__name__} must implement `async def raw_messages(self, store, chat_id)`"
        raise NotImplementedError(msg)

    # -- fixtures the suite builds on them ---------------------------------------------

    @pytest.fixture
    def capabilities(
        self, request: pytest.FixtureRequest, store_factory: StoreFactory
    ) -> Capabilities:
        """Return the store's capabilities (``store.capabilities``).

        The driver's declared properties; ``steps``/``archive`` are the protocols its
        driver implements.
        """
        built = store_factory()
        driver = type(built.driver)
        declared = built.capabilities
        if not isinstance(getattr(driver, "capabilities", Capabilities()), Capabilities):
            pytest.fail(
                f"{driver.__name__}.capabilities must be a threadkeep.Capabilities instance",
                pytrace=False,
            )
        request.node.user_properties.append(("threadkeep_driver", _driver_label(driver)))
        request.node.user_properties.append(
            ("threadkeep_capabilities", declared.model_dump(mode="json", exclude={"notes"}))
        )
        for marker in request.node.iter_markers("threadkeep_capability"):
            require_capability(declared, str(marker.args[0]))
        return declared

    @pytest.fixture(autouse=True)
    def _threadkeep_contract_test(self, capabilities: Capabilities) -> Capabilities:
        """Apply capability skips and record the driver for every contract test."""
        return capabilities

    @pytest_asyncio.fixture
    async def store(
        self, store_factory: StoreFactory, capabilities: Capabilities
    ) -> AsyncIterator[Store]:
        """Yield a store opened on the test's fresh storage; closed afterwards."""
        opened = await store_factory().open()
        try:
            yield opened
        finally:
            await opened.close()

    async def raw_live_messages(self, store: Store, chat_id: UUID) -> list[RawMessage]:
        """Return the chat's stored rows that are not hidden, in seq order."""
        rows = await self.raw_messages(store, chat_id)
        return sorted((r for r in rows if not r.hidden), key=lambda r: r.seq)


def _driver_label(driver: type[Any]) -> str:
    schemes = ", ".join(getattr(driver, "schemes", ())) or "?"
    return f"{driver.__name__} ({schemes})"
