"""Fault injection: every emulator call consults a rule table before it runs.

A rule names an operation (or ``"*"``), optionally a predicate on the call's arguments and a
probability, and what happens when it fires: the call fails (nothing happens), times out
(after ``delay`` seconds; with ``applied=True`` the effect happened and only the answer was
lost, the ambiguous case real clients face) or is slow (``delay`` seconds, then it runs).
Probabilities draw from one seeded :class:`random.Random`, so a test run is reproducible.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ["ArgsPredicate", "FaultAction", "FaultRule", "FaultTable"]

ArgsPredicate = Callable[[Mapping[str, Any]], bool]
"""Decides from a call's keyword arguments whether a rule applies to it."""


class FaultAction(StrEnum):
    """What a firing rule does to the call."""

    FAIL = "fail"
    TIMEOUT = "timeout"
    SLOW = "slow"


@dataclass(eq=False)
class FaultRule:
    """One row of the fault table.

    Attributes:
        operation: The operation name (``"create_session"``, ``"create_events"``...) or
            ``"*"`` for every operation.
        action: Fail, time out or slow down the call.
        when: Optional predicate on the call's keyword arguments; the rule applies only
            when it returns true.
        probability: Chance in ``[0, 1]`` that an applicable call fires the rule.
        delay: Seconds to wait before timing out (``timeout``) or before running (``slow``).
        hold: An event the firing call waits for (after ``delay``) before it fails, times
            out or runs: a test releases it when its interleaving is in place, which a
            delay only makes likely.
        applied: For ``timeout``: the call takes effect before the answer is lost.
        times: Fire at most this many times (``None``: unlimited).
        name: A label for logs and test messages.
        fired: How many times the rule has fired (updated by the table).
    """

    operation: str
    action: FaultAction = FaultAction.FAIL
    when: ArgsPredicate | None = None
    probability: float = 1.0
    delay: float = 0.0
    hold: asyncio.Event | None = None
    applied: bool = False
    times: int | None = None
    name: str = ""
    fired: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"probability must be within [0, 1], not {self.probability}")
        if self.delay < 0:
            raise ValueError(f"delay must be at least 0 seconds, not {self.delay}")
        self.action = FaultAction(self.action)

    def applies_to(self, operation: str, args: Mapping[str, Any]) -> bool:
        """Return whether the rule covers this call (before the probability draw)."""
        if self.operation not in ("*", operation):
            return False
        if self.times is not None and self.fired >= self.times:
            return False
        return self.when is None or self.when(args)


class FaultTable:
    """The ordered rules of one emulator and the seeded random source they draw from.

    Args:
        seed: Seed of the :class:`random.Random` that probabilities draw from.
    """

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self._rules: list[FaultRule] = []
        self._holds: dict[int, int] = {}
        self._lock = threading.Lock()

    @property
    def rules(self) -> tuple[FaultRule, ...]:
        """The rules, in the order they are consulted."""
        return tuple(self._rules)

    def add(self, *rules: FaultRule) -> None:
        """Append rules to the table; adding a rule that is there already holds it once more.

        Several clients (stores) may install the same rule object: it stays in the table
        until each of them has removed it.
        """
        with self._lock:
            for rule in rules:
                held = self._holds.get(id(rule), 0)
                if not held:
                    self._rules.append(rule)
                self._holds[id(rule)] = held + 1

    def remove(self, *rules: FaultRule) -> None:
        """Release rules (by identity); a rule leaves once every holder removed it."""
        with self._lock:
            for rule in rules:
                held = self._holds.get(id(rule), 0)
                if held > 1:
                    self._holds[id(rule)] = held - 1
                elif held == 1:
                    del self._holds[id(rule)]
                    self._rules = [r for r in self._rules if r is not rule]

    def clear(self) -> None:
        """Remove every rule."""
        with self._lock:
            self._rules.clear()
            self._holds.clear()

    def reseed(self, seed: int) -> None:
        """Restart the random source from ``seed``."""
        with self._lock:
            self.rng.seed(seed)

    def decide(self, operation: str, args: Mapping[str, Any]) -> FaultRule | None:
        """Return the first applicable rule that fires for this call, or ``None``.

        Each applicable rule with ``probability < 1`` draws once from the table's random
        source, in table order, so the sequence of decisions is reproducible for a seed.
        """
        with self._lock:
            for rule in self._rules:
                if not rule.applies_to(operation, args):
                    continue
                if rule.probability >= 1.0 or self.rng.random() < rule.probability:
                    rule.fired += 1
                    return rule
            return None
