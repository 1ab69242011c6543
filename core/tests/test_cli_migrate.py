"""``threadkeep migrate`` on a backend without a versioned schema, and the ``auto_migrate``
option every store takes (the SQL driver's upgrades: backends/sql/tests/test_migrate_command.py)."""

from __future__ import annotations

import json

import pytest

from threadkeep import InvalidArgument, open_store


def test_a_backend_without_migrations_says_so(cli) -> None:
    result = cli("migrate", "--url", "memory://x")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == (
        "memory:// (MemoryDriver) has no schema migrations: it keeps no versioned schema, so "
        "there is nothing to upgrade"
    )
    for action in ("current", "history"):
        shown = cli("migrate", action, "--json", "--url", "memory://x")
        assert json.loads(shown.stdout) == {"migrations": False, "driver": "MemoryDriver"}


def test_sql_goes_only_with_the_upgrade(cli) -> None:
    result = cli("migrate", "history", "--sql", "--url", "memory://x")
    assert result.exit_code == 2
    assert "--sql goes with the upgrade" in result.stderr


def test_an_unknown_action_is_a_usage_error(cli) -> None:
    result = cli("migrate", "downgrade", "--url", "memory://x")
    assert result.exit_code == 2


async def test_every_store_takes_auto_migrate_and_checks_it() -> None:
    async with open_store("memory://", auto_migrate=False) as store:
        assert store.auto_migrate is False
        assert store.schema_migrations() is None
    with pytest.raises(InvalidArgument, match="auto_migrate must be True or False"):
        open_store("memory://", auto_migrate="no")
