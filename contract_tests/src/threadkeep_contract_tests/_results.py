"""Recording contract-suite outcomes as JSON, for the capability matrix.

With ``--threadkeep-results PATH`` the plugin registers a :class:`ResultRecorder`; every
test of a :class:`~threadkeep_contract_tests.StoreContract` subclass is written with its
driver, contract area, outcome (``passed``, ``failed``, ``error``, ``skipped``,
``xfailed``, ``xpassed``) and skip/xfail reason. ``python -m threadkeep_contract_tests.matrix``
renders the file as ``docs/capabilities.md``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ._base import ContractBase, contract_area

__all__ = ["RESULTS_FORMAT", "ResultRecorder"]

RESULTS_FORMAT = 1
"""Version of the JSON layout written by :class:`ResultRecorder`."""


def _reason(report: pytest.TestReport) -> str:
    wasxfail = getattr(report, "wasxfail", None)
    if wasxfail:
        return str(wasxfail)
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return ""


def _outcome(report: pytest.TestReport) -> str | None:
    xfail = hasattr(report, "wasxfail")
    if report.when == "call":
        if report.passed:
            return "xpassed" if xfail else "passed"
        if report.skipped:
            return "xfailed" if xfail else "skipped"
        return "failed"
    if report.skipped:
        return "xfailed" if xfail else "skipped"
    if report.failed:
        return "error"
    return None


class ResultRecorder:
    """A pytest plugin object collecting contract outcomes and writing them at session end.

    Args:
        path: Where to write the JSON results (parent directories are created).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tests: dict[str, dict[str, Any]] = {}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Note every contract test selected, with its area and required capabilities."""
        for item in session.items:
            cls = getattr(item, "cls", None)
            if (
                cls is None
                or not issubclass(cls, ContractBase)
                or not isinstance(item, pytest.Function)
            ):
                continue
            needs = [m.args[0] for m in item.iter_markers("threadkeep_capability") if m.args]
            self._tests[item.nodeid] = {
                "nodeid": item.nodeid,
                "test": item.originalname,
                "suite": cls.__name__,
                "area": contract_area(cls, item.originalname),
                "capabilities": needs,
                "driver": None,
                "driver_capabilities": {},
                "outcome": "not run",
                "reason": "",
            }

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Fold one phase's report into the test's outcome (the worst phase wins)."""
        entry = self._tests.get(report.nodeid)
        if entry is None:
            return
        for key, value in report.user_properties:
            if key == "threadkeep_driver":
                entry["driver"] = value
            elif key == "threadkeep_capabilities":
                entry["driver_capabilities"] = value
        outcome = _outcome(report)
        if outcome is None or (report.when == "teardown" and entry["outcome"] == "failed"):
            return
        if report.when == "teardown" and outcome == "skipped":
            return
        entry["outcome"], entry["reason"] = outcome, _reason(report)

    def pytest_sessionfinish(self) -> None:
        """Write the collected results as JSON."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {"format": RESULTS_FORMAT, "tests": list(self._tests.values())}
        self.path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
