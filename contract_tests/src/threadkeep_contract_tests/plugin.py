"""The pytest plugin (entry point ``pytest11: threadkeep``): markers, options, profiles.

It only registers things; the tests come from subclassing
:class:`threadkeep_contract_tests.StoreContract` in a driver's own test module.

Markers:
    ``threadkeep_capability(name)``: the test needs the driver capability ``name``
    (``steps``, ``archive``, ``persistent``...); it skips, naming it, when undeclared.
    ``threadkeep_service(name)``: the test needs an external service (for selection with
    ``-m``); use :func:`threadkeep_contract_tests.require_service` to skip or fail.

Options:
    ``--threadkeep-require-services``: a missing service fails instead of skipping (also on
    when ``THREADKEEP_REQUIRE_SERVICES=1``; CI sets it).
    ``--threadkeep-results=PATH``: write every contract test's outcome as JSON, the input of
    ``python -m threadkeep_contract_tests.matrix``.

Hypothesis profiles ``dev``, ``ci`` and ``nightly`` are registered; the one named by
``HYPOTHESIS_PROFILE`` (default ``dev``) is loaded.

Skipped tests: unless skips are asked for one by one (``-rs``, ``-ra``), the summary shows
one line per skip reason with its count (:func:`pytest_terminal_summary`): a run without
the test servers skips hundreds of tests for three reasons, and says so in three lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ._profiles import load_profile, register_profiles
from ._services import set_services_required

__all__ = [
    "pytest_addoption",
    "pytest_configure",
    "pytest_report_header",
    "pytest_terminal_summary",
    "skip_reasons",
]

_RECORDER_NAME = "threadkeep-results-recorder"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add the ``threadkeep`` option group."""
    group = parser.getgroup("threadkeep", "threadkeep contract suite")
    group.addoption(
        "--threadkeep-require-services",
        action="store_true",
        default=False,
        help="fail (instead of skip) tests whose service is not configured; "
        "also on with THREADKEEP_REQUIRE_SERVICES=1",
    )
    group.addoption(
        "--threadkeep-results",
        metavar="PATH",
        default=None,
        help="write contract test outcomes as JSON (input of threadkeep_contract_tests.matrix)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register markers and Hypothesis profiles, load the profile, note the options."""
    config.addinivalue_line(
        "markers",
        "threadkeep_capability(name): needs the driver capability `name`; skips when undeclared",
    )
    config.addinivalue_line(
        "markers", "threadkeep_service(name): needs the external service `name`"
    )
    register_profiles()
    load_profile()
    set_services_required(bool(config.getoption("threadkeep_require_services")))
    results = config.getoption("threadkeep_results")
    if results and not config.pluginmanager.has_plugin(_RECORDER_NAME):
        from ._results import ResultRecorder

        config.pluginmanager.register(ResultRecorder(Path(results)), _RECORDER_NAME)


def pytest_report_header(config: pytest.Config) -> str:
    """Show the Hypothesis profile in use, so a CI log says how hard the suite ran."""
    from hypothesis import settings

    current = settings()
    return (
        f"threadkeep contract suite: max_examples={current.max_examples}, "
        f"stateful_step_count={current.stateful_step_count}, "
        f"derandomize={current.derandomize}"
    )


def skip_reasons(reports: list[pytest.TestReport]) -> list[tuple[int, str]]:
    """Count skipped tests by reason, most frequent first.

    Args:
        reports: The ``skipped`` reports of a run (``terminalreporter.stats["skipped"]``).

    Returns:
        ``[(count, reason), ...]``; ties in reason order.
    """
    counts: dict[str, int] = {}
    for report in reports:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        counts[reason] = counts.get(reason, 0) + 1
    return sorted(((n, r) for r, n in counts.items()), key=lambda item: (-item[0], item[1]))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Print the skips grouped by reason, one line each, unless ``-rs`` lists them already."""
    del exitstatus
    del config
    if "s" in getattr(terminalreporter, "reportchars", ""):  # -rs, -ra, -rA: pytest lists them
        return
    reports = [r for r in terminalreporter.stats.get("skipped", []) if r.when != "teardown"]
    if not reports:
        return
    terminalreporter.section("skipped tests, by reason (-rs lists each)", sep="-")
    for count, reason in skip_reasons(reports):
        terminalreporter.line(f"SKIPPED {count:>4}: {reason}")
