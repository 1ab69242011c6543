"""Hypothesis settings profiles for the contract suite: ``dev``, ``ci`` and ``nightly``.

``ci`` follows Hypothesis' own CI profile (derandomized, no deadline, no example database)
and is bounded so that the whole suite on one driver stays within a few minutes on two
cores; ``nightly`` runs ten times its examples. The profile named by ``HYPOTHESIS_PROFILE``
(default ``dev``) is loaded by the pytest plugin.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

__all__ = [
    "CI_MAX_EXAMPLES",
    "CI_STEP_COUNT",
    "PROFILES",
    "PROFILE_ENV",
    "load_profile",
    "register_profiles",
]

PROFILE_ENV = "HYPOTHESIS_PROFILE"
"""Environment variable naming the profile to load."""

PROFILES = ("dev", "ci", "nightly")
"""The profiles this package registers."""

CI_MAX_EXAMPLES = 30
"""State-machine runs (examples) per property test under ``ci``."""

CI_STEP_COUNT = 40
"""Rules per state-machine run under ``ci`` (and ``nightly``)."""

# Store operations do I/O: a per-example deadline would flake on a loaded CI machine, and
# data generation is cheap next to the rules, so `too_slow` only reports the backend's speed.
# The `explain` phase traces every line executed while it replays a failure: on a store's
# call stack that turns a few seconds of shrinking into minutes, so the profiles skip it.
_PARENT = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[p for p in Phase if p is not Phase.explain],
)


def register_profiles() -> None:
    """Register ``dev``, ``ci`` and ``nightly`` with Hypothesis (idempotent)."""
    settings.register_profile(
        "dev", _PARENT, max_examples=15, stateful_step_count=25, print_blob=True
    )
    settings.register_profile(
        "ci",
        _PARENT,
        max_examples=CI_MAX_EXAMPLES,
        stateful_step_count=CI_STEP_COUNT,
        derandomize=True,
        database=None,
        print_blob=True,
        # Shrink one failure at a time: several at once can take minutes on a broken driver.
        report_multiple_bugs=False,
    )
    settings.register_profile(
        "nightly",
        _PARENT,
        max_examples=10 * CI_MAX_EXAMPLES,
        stateful_step_count=CI_STEP_COUNT,
        derandomize=False,
        print_blob=True,
    )


def load_profile() -> str | None:
    """Load the profile named by ``HYPOTHESIS_PROFILE`` (default ``dev``).

    A name this package does not register is left alone (the project's own conftest may
    register and load it), so the plugin never breaks another project's settings.

    Returns:
        The name of the profile loaded, or ``None`` if it was not one of :data:`PROFILES`.
    """
    name = os.environ.get(PROFILE_ENV, "dev") or "dev"
    if name not in PROFILES:
        return None
    settings.load_profile(name)
    return name
