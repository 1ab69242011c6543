"""``threadkeep migrate``: upgrade a store's schema, print the DDL, or show where it stands.

The command never opens the store (a store opened with ``auto_migrate=False`` cannot open
while its schema is outdated); it uses ``Store.schema_migrations()`` of the unopened store,
which connects for each step. Drivers without a versioned schema (memory, MongoDB, the
memory service) say so and exit 0: there is nothing to upgrade.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from .._open import open_store
from .._registry import url_scheme
from .._schema_migrations import SchemaMigrations, SchemaRevision
from ._app import EXIT_USAGE, CliError, JsonOption, UrlOption, print_json, resolve_url, run

__all__ = ["Action", "migrate", "register"]


class Action(StrEnum):
    """What ``threadkeep migrate`` does."""

    UPGRADE = "upgrade"
    CURRENT = "current"
    HISTORY = "history"


def migrate(
    action: Annotated[
        Action,
        typer.Argument(
            help="upgrade (the default): bring the schema to the newest revision; current: "
            "the revision the database is at; history: every revision this code ships.",
        ),
    ] = Action.UPGRADE,
    sql: Annotated[
        bool,
        typer.Option("--sql", help="Print the DDL the upgrade would run instead of running it."),
    ] = False,
    json_: JsonOption = False,
    url: UrlOption = None,
) -> None:
    """Upgrade the store's schema (`--sql`: print the DDL), or show `current` / `history`.

    Run it as a database user allowed to run DDL, then open the store with
    `auto_migrate=False` (setting `auto_migrate`, `THREADKEEP_AUTO_MIGRATE=false`) as the
    application's user.
    """
    if sql and action is not Action.UPGRADE:
        raise CliError(f"--sql goes with the upgrade, not with {action}", exit_code=EXIT_USAGE)
    resolved = resolve_url(url)
    store = open_store(resolved, auto_migrate=False)
    migrations = store.schema_migrations()
    if migrations is None:
        _no_migrations(f"{url_scheme(resolved)}://", type(store.driver).__name__, json_=json_)
        return
    if action is Action.HISTORY:
        run(_history(migrations, json_=json_))
    elif action is Action.CURRENT:
        run(_current(migrations, json_=json_))
    elif sql:
        typer.echo(run(migrations.upgrade_sql()), nl=False)
    else:
        run(_upgrade(migrations, json_=json_))


def _no_migrations(scheme: str, driver: str, *, json_: bool) -> None:
    if json_:
        print_json({"migrations": False, "driver": driver})
        return
    typer.echo(
        f"{scheme} ({driver}) has no schema migrations: it keeps no versioned schema, so "
        "there is nothing to upgrade"
    )


def _head(history: list[SchemaRevision]) -> str | None:
    return history[-1].revision if history else None


async def _upgrade(migrations: SchemaMigrations, *, json_: bool) -> None:
    before, after = await migrations.upgrade()
    if json_:
        print_json({"from": before, "to": after, "changed": before != after})
    elif before == after:
        typer.echo(f"{migrations.target}: schema at revision {after}, the newest: nothing to do")
    else:
        typer.echo(f"{migrations.target}: schema upgraded from {before or 'none'} to {after}")


async def _current(migrations: SchemaMigrations, *, json_: bool) -> None:
    current = await migrations.current()
    head = _head(migrations.history())
    if json_:
        print_json({"current": current, "head": head, "up_to_date": current == head})
    elif current == head:
        typer.echo(f"{current} (the newest revision)")
    else:
        typer.echo(
            f"{current or 'none (no threadkeep schema yet)'}; this threadkeep needs {head}: "
            "upgrade with `threadkeep migrate` (`--sql` prints the DDL)"
        )


async def _history(migrations: SchemaMigrations, *, json_: bool) -> None:
    history = migrations.history()
    current = await migrations.current()
    head = _head(history)
    if json_:
        rows = [
            {
                "revision": r.revision,
                "down_revision": r.down_revision,
                "description": r.description,
                "current": r.revision == current,
                "head": r.revision == head,
            }
            for r in history
        ]
        print_json({"revisions": rows, "current": current, "head": head})
        return
    for r in history:
        marks = [
            m for m, on in (("current", r.revision == current), ("head", r.revision == head)) if on
        ]
        suffix = f"  ({', '.join(marks)})" if marks else ""
        typer.echo(f"{r.revision}  {r.description}{suffix}")
    if current is None:
        typer.echo("(the database has no threadkeep schema yet)")


def register(app: typer.Typer) -> None:
    """Add ``migrate`` to ``app``."""
    app.command("migrate")(migrate)
