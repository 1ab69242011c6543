"""Skip or fail when a driver's test service is not configured (team convention, issue 2).

A test that needs a server skips with a reason naming the environment variable when it is
unset; with ``--threadkeep-require-services`` or ``THREADKEEP_REQUIRE_SERVICES=1`` (CI) a
missing server is a failure instead, so CI can never pass by skipping.
"""

from __future__ import annotations

import os

import pytest

__all__ = [
    "REQUIRE_SERVICES_ENV",
    "SERVICE_SCRIPTS",
    "require_service",
    "service_hint",
    "services_required",
    "set_services_required",
]

REQUIRE_SERVICES_ENV = "THREADKEEP_REQUIRE_SERVICES"
"""Environment variable that, set to ``1``, turns a missing service into a failure."""

SERVICE_SCRIPTS = {
    "THREADKEEP_TEST_POSTGRES_URL": "postgres",
    "THREADKEEP_TEST_MONGODB_URL": "mongodb",
    "THREADKEEP_TEST_S3_URL": "s3",
}
"""threadkeep's own test servers: environment variable -> its script in ``.ci/services``."""

_required_by_option = False


def service_hint(env_var: str) -> str:
    """Return how to get ``env_var`` set, for a skip reason (``""`` for an unknown variable).

    For threadkeep's own servers: from a clone, the script that starts the server and the
    one that prints its variables, ready to paste.
    """
    script = SERVICE_SCRIPTS.get(env_var)
    if script is None:
        return ""
    path = f".ci/services/{script}.sh"
    return f'; from a threadkeep clone: `bash {path} start` then `eval "$(bash {path} env)"`'


def set_services_required(required: bool) -> None:
    """Record the ``--threadkeep-require-services`` option (called by the pytest plugin)."""
    global _required_by_option  # noqa: PLW0603 - one process-wide switch, set once per session
    _required_by_option = required


def services_required() -> bool:
    """Return whether a missing service must fail (option given, or the env var is ``1``)."""
    flag = os.environ.get(REQUIRE_SERVICES_ENV, "").strip().lower()
    return _required_by_option or flag in {"1", "true", "yes"}


def require_service(env_var: str, what: str) -> str:
    """Return the value of ``env_var``, or skip (fail under CI) the calling test.

    Use it in a driver's ``store_factory`` fixture::

        url = require_service("THREADKEEP_TEST_POSTGRES_URL", "PostgreSQL")

    Args:
        env_var: The variable holding the service's URL or address.
        what: A human name for the service, used in the reason (``"PostgreSQL"``). For
            threadkeep's own servers (:data:`SERVICE_SCRIPTS`) the reason also says how to
            start one and set the variable.

    Returns:
        The variable's non-empty value.

    Raises:
        pytest.skip.Exception: If the variable is unset or empty and services are optional.
        pytest.fail.Exception: If it is unset or empty and services are required.
    """
    value = os.environ.get(env_var, "").strip()
    if value:
        return value
    reason = f"{what} is not configured: set {env_var} to run these tests{service_hint(env_var)}"
    if services_required():
        pytest.fail(
            f"{reason} ({REQUIRE_SERVICES_ENV}=1 or --threadkeep-require-services makes "
            "a missing service a failure)",
            pytrace=False,
        )
    pytest.skip(reason)
