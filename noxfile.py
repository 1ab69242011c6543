"""Development sessions: ``python3 -m uv run nox -s <session>``.

Sessions run in the workspace's own environment (``uv run``), so they use exactly the locked
dependencies; services (PostgreSQL, MongoDB wire, S3) come from ``.ci/services/*.sh``.
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "none"
nox.options.sessions = ["lint", "typecheck", "tests"]

SOURCES = [
    "core/src",
    "backends/sql/src",
    "backends/mongodb/src",
    "backends/memservice/src",
    "backends/s3/src",
    "contract_tests/src",
]


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff lint and format check over the whole workspace."""
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """Strict mypy over every distribution's sources."""
    session.run("mypy", *SOURCES)


@nox.session
def tests(session: nox.Session) -> None:
    """The whole test suite (what the README's test command runs)."""
    session.run("pytest", *session.posargs)


@nox.session
def contract(session: nox.Session) -> None:
    """Only the contract suite, on every driver whose service is configured."""
    session.run("pytest", "-k", "Contract", *session.posargs)


@nox.session
def nightly(session: nox.Session) -> None:
    """The suite with the ``nightly`` Hypothesis profile (10x the CI examples)."""
    session.env["HYPOTHESIS_PROFILE"] = "nightly"
    session.run("pytest", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks against PostgreSQL (``THREADKEEP_TEST_POSTGRES_URL``), printed as ratios."""
    session.run("python", "bench/sql_bench.py", *session.posargs)
