"""What the copied Agents SDK tests construct: ``SQLiteSession`` built as a ``ThreadkeepSession``.

The upstream tests build ``SQLiteSession(session_id, db_path=":memory:", session_settings=None)``;
here that constructor gives a :class:`~threadkeep.integrations.openai_agents.ThreadkeepSession`
at the current test's location (SQLite or PostgreSQL, see upstream/conftest.py): the same
``db_path`` gives the same location (sessions sharing a database file share their data), and
``":memory:"`` a location of its own, as each in-memory ``SQLiteSession`` has its own database.
``get_text_message`` is the upstream test helper (MIT License, Copyright (c) 2025 OpenAI),
copied unchanged from ``tests/test_responses.py`` of openai-agents 0.24.0.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from agents import SessionSettings, set_tracing_disabled
from openai.types.responses import ResponseOutputItem, ResponseOutputMessage, ResponseOutputText

from threadkeep.integrations.openai_agents import ThreadkeepSession
from threadkeep.sync import SyncStore

set_tracing_disabled(True)  # no trace export: the tests have no network

# Set by upstream/conftest.py's `upstream_location` fixture for the running test:
# db_path (or None for ":memory:") -> (an open sync store, the user id of that location).
current_location: Callable[[str | None], tuple[SyncStore, str]] | None = None


class SQLiteSession(ThreadkeepSession):
    """``ThreadkeepSession`` with ``SQLiteSession``'s constructor (see the module docstring)."""

    def __init__(
        self,
        session_id: str,
        db_path: str | os.PathLike[str] = ":memory:",
        session_settings: SessionSettings | None = None,
    ) -> None:
        if current_location is None:
            raise RuntimeError("the upstream_location fixture is not active")
        path = None if str(db_path) == ":memory:" else os.fspath(db_path)
        store, user_id = current_location(path)
        super().__init__(
            session_id, store=store, user_id=user_id, session_settings=session_settings
        )


# Copied tests of SQLiteSession's own machinery: skipped by upstream/conftest.py with these reasons.
_INTERNALS = "tests SQLiteSession's own machinery, which ThreadkeepSession does not have: "
OUT_OF_SCOPE = {
    "test_await_mutation_cancellation_hides_later_failure_without_loop_error": (
        "tests the SDK's private sqlite_session._await_mutation helper; no session is involved"
    ),
    "test_sqlite_session_close_closes_worker_thread_connections": _INTERNALS
    + "its per-thread sqlite3 connections",
    "test_sqlite_session_reaps_connections_from_exited_worker_threads": _INTERNALS
    + "its per-thread sqlite3 connections",
    "test_sqlite_session_closes_retired_connections_before_the_next_allocation": _INTERNALS
    + "its per-thread sqlite3 connections",
    "test_sqlite_session_keeps_connections_of_live_worker_threads": _INTERNALS
    + "its per-thread sqlite3 connections",
    "test_sqlite_session_closed_rejects_empty_add_items": _INTERNALS
    + "its RuntimeError text 'SQLiteSession is closed' (a closed ThreadkeepSession raises "
    "threadkeep's BackendUnavailable, add_items([]) included; test_sdk_session.py checks it)",
    "test_sqlite_session_pop_item_skips_corrupt_most_recent": _INTERNALS
    + "raw corrupt JSON rows written into its agent_messages table with sqlite3",
    "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows": _INTERNALS
    + "raw corrupt JSON rows written into its agent_messages table with sqlite3",
    "test_sqlite_session_get_items_limit_skips_corrupt_newest_rows": _INTERNALS
    + "raw corrupt JSON rows written into its agent_messages table with sqlite3",
    "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows": _INTERNALS
    + "raw corrupt JSON rows written into its agent_messages table with sqlite3",
    "test_sqlite_session_file_lock_is_shared_across_instances": _INTERNALS
    + "its class-level file-lock registry",
    "test_sqlite_session_failed_add_items_releases_write_lock": _INTERNALS
    + "a monkeypatched sqlite3 connection and its write lock",
    "test_sqlite_session_failed_clear_session_rolls_back": _INTERNALS
    + "a monkeypatched sqlite3 connection and its write lock",
    "test_sqlite_session_failed_pop_item_releases_write_lock": _INTERNALS
    + "a monkeypatched sqlite3 connection and its write lock",
    "test_sqlite_session_rollback_failure_evicts_connection": _INTERNALS
    + "a monkeypatched sqlite3 connection and its connection pool",
    "test_sqlite_session_close_retries_quarantined_connection": _INTERNALS
    + "its quarantined sqlite3 connections",
    "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome": _INTERNALS
    + "a sqlite3 connection factory patched into its private _get_connection",
}


# -- the upstream helper, unchanged ------------------------------------------------------------


def get_text_message(content: str) -> ResponseOutputItem:
    return ResponseOutputMessage(
        id="1",
        type="message",
        role="assistant",
        content=[ResponseOutputText(text=content, type="output_text", annotations=[], logprobs=[])],
        status="completed",
    )
