"""Ready-made fault rules for the driver's tests: lose a share of the locator writes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._locators import LOCATOR_PREFIX
from .emulator import FaultAction, FaultRule

__all__ = ["BEST_EFFORT_KINDS", "is_locator_write", "locator_write_fault"]

BEST_EFFORT_KINDS = ("chat", "message", "tool_call", "reasoning")
"""Locator kinds written best effort (the ``archived`` index is written for real)."""


def is_locator_write(args: Mapping[str, Any]) -> bool:
    """Return whether a ``create_session`` call writes a best-effort locator."""
    description = args.get("description")
    if not isinstance(description, str) or not description.startswith(LOCATOR_PREFIX):
        return False
    return description.rstrip("/").rsplit("/", 1)[-1] in BEST_EFFORT_KINDS


def locator_write_fault(
    probability: float = 0.2, *, action: FaultAction = FaultAction.FAIL
) -> FaultRule:
    """Return a rule that makes that share of locator writes fail (or time out).

    Args:
        probability: Share of locator writes hit, in ``[0, 1]`` (default 20 %).
        action: ``fail`` (nothing written) or ``timeout`` (see :class:`FaultRule`).

    Returns:
        A rule for ``create_session`` calls whose description is a locator's.
    """
    return FaultRule(
        "create_session",
        action,
        when=is_locator_write,
        probability=probability,
        name=f"{probability:.0%} of locator writes {action}",
    )
