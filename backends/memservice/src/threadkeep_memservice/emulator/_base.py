"""The emulator's call path (faults, counts, the lock), its spaces and soft-delete expiry."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import secrets
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ._errors import NotFoundError, ServiceTimeout, ServiceUnavailable
from ._faults import FaultAction, FaultTable
from ._records import MAX_DEDUP_KEY, Space, check_string
from ._state import SessionRow, SpaceState

__all__ = ["DEFAULT_SOFT_DELETE_TTL", "Call", "ServiceBase"]

T = TypeVar("T")

DEFAULT_SOFT_DELETE_TTL = 30 * 24 * 3600.0
"""Seconds a soft-deleted session or event is kept before it disappears (30 days)."""

_LOGGED_TYPES = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class Call:
    """One call the emulator received, for tests that check what a client asked.

    Attributes:
        operation: The operation name.
        args: The call's scalar keyword arguments; batches and documents are summarized
            as ``"<N items>"`` / ``"<document>"`` so the log stays small.
    """

    operation: str
    args: Mapping[str, Any]


def _summary(args: Mapping[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for key, value in args.items():
        if isinstance(value, _LOGGED_TYPES):
            summary[key] = value
        elif isinstance(value, list | tuple):
            summary[key] = f"<{len(value)} items>"
        else:
            summary[key] = "<document>"
    return summary


class ServiceBase:
    """State, fault table, call counts and expiry of one emulated memory service.

    Args:
        seed: Seed of the fault table's random source.
        clock: The service's clock, seconds since the epoch (soft-delete expiry uses it).
        soft_delete_ttl: Seconds a soft-deleted record survives before it disappears.
        log_size: How many recent calls :attr:`call_log` keeps.
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        clock: Callable[[], float] = time.time,
        soft_delete_ttl: float = DEFAULT_SOFT_DELETE_TTL,
        log_size: int = 10_000,
    ) -> None:
        if soft_delete_ttl <= 0:
            raise ValueError("soft_delete_ttl must be a positive number of seconds")
        self.faults = FaultTable(seed)
        self.calls: Counter[str] = Counter()
        self.call_log: deque[Call] = deque(maxlen=log_size)
        self.soft_delete_ttl = soft_delete_ttl
        self._clock = clock
        self._lock = threading.RLock()
        self._spaces: dict[str, SpaceState] = {}
        self._space_keys: dict[str, str] = {}
        self._expiry: list[tuple[float, int, str, str, str | None, float]] = []
        self._tiebreak = itertools.count()

    # -- call path -----------------------------------------------------------------------

    def reset_counts(self) -> None:
        """Forget the call counts and the call log (tests count from here)."""
        self.calls.clear()
        self.call_log.clear()

    async def _call(self, operation: str, args: dict[str, Any], apply: Callable[[], T]) -> T:
        """Count the call, consult the fault table, then run ``apply`` under the lock."""
        self.calls[operation] += 1
        self.call_log.append(Call(operation, _summary(args)))
        rule = self.faults.decide(operation, args)
        await asyncio.sleep(0)
        if rule is not None:
            label = rule.name or f"{rule.action} rule on {rule.operation}"
            if rule.delay:
                await asyncio.sleep(rule.delay)
            if rule.hold is not None:
                await rule.hold.wait()
            if rule.action is FaultAction.FAIL:
                raise ServiceUnavailable(
                    f"{operation}: injected failure ({label}); nothing happened"
                )
            if rule.action is FaultAction.TIMEOUT:
                if rule.applied:
                    self._apply_ignoring_errors(apply)
                raise ServiceTimeout(f"{operation}: no answer in time ({label})")
        with self._lock:
            self._expire()
            return apply()

    def _apply_ignoring_errors(self, apply: Callable[[], object]) -> None:
        # A lost answer hides whatever the call returned or raised.
        with self._lock:
            self._expire()
            with contextlib.suppress(Exception):
                apply()

    def _now(self) -> float:
        return float(self._clock())

    @staticmethod
    def _new_id() -> str:
        return secrets.token_hex(12)

    # -- expiry of soft-deleted records ----------------------------------------------------

    def _schedule_expiry(
        self, space_id: str, session_id: str, event_id: str | None, at: float
    ) -> None:
        entry = (
            at + self.soft_delete_ttl,
            next(self._tiebreak),
            space_id,
            session_id,
            event_id,
            at,
        )
        heapq.heappush(self._expiry, entry)

    def _expire(self) -> None:
        now = self._now()
        while self._expiry and self._expiry[0][0] <= now:
            _, _, space_id, session_id, event_id, deleted_at = heapq.heappop(self._expiry)
            state = self._spaces.get(space_id)
            row = None if state is None else state.sessions.get(session_id)
            if state is None or row is None:
                continue
            if event_id is None:
                if row.deleted_at == deleted_at:
                    self._drop_session(state, row)
                continue
            event = row.events.get(event_id)
            if event is not None and event.deleted_at == deleted_at:
                row.remove_event(event)

    @staticmethod
    def _drop_session(state: SpaceState, row: SessionRow) -> None:
        del state.sessions[row.session_id]
        state.unindex(row)
        if row.dedup_key is not None and state.live_keys.get(row.dedup_key) == row.session_id:
            del state.live_keys[row.dedup_key]

    # -- spaces --------------------------------------------------------------------------

    def _space(self, space_id: str) -> SpaceState:
        state = self._spaces.get(space_id)
        if state is None:
            raise NotFoundError(f"no space {space_id!r}")
        return state

    async def create_space(self, *, dedup_key: str | None = None) -> Space:
        """Create a space, or return the one that already holds ``dedup_key``.

        Raises:
            ValidationError: If ``dedup_key`` is empty or longer than 72 characters.
        """

        def apply() -> Space:
            if dedup_key is not None:
                check_string(dedup_key, "dedup_key", max_length=MAX_DEDUP_KEY)
                existing = self._space_keys.get(dedup_key)
                if existing is not None:
                    return self._spaces[existing].space
            space = Space(space_id=self._new_id(), dedup_key=dedup_key, created_at=self._now())
            self._spaces[space.space_id] = SpaceState(space=space)
            if dedup_key is not None:
                self._space_keys[dedup_key] = space.space_id
            return space

        return await self._call("create_space", {"dedup_key": dedup_key}, apply)

    async def get_space(self, space_id: str) -> Space:
        """Return a space.

        Raises:
            NotFoundError: If there is no such space.
        """
        return await self._call(
            "get_space", {"space_id": space_id}, lambda: self._space(space_id).space
        )
