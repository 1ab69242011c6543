"""Differential conformance: ``ThreadkeepSession`` against the SDK's own ``SQLiteSession``.

``agents.SQLiteSession`` (shipped in the installed ``openai-agents``) is the reference. A
Hypothesis state machine gives two sessions of each kind (sharing one store / one database
file, so isolation is checked too) the same generated operations: ``add_items`` with zero to
three items of the kinds the SDK produces (text messages in unicode, content-part messages,
``function_call``, ``function_call_output``, ``reasoning`` with encrypted content, unknown
item kinds), ``get_items`` with no limit, 0 and 1 to 8 (the latest N, oldest first),
``pop_item`` (the newest) and ``clear_session``; after every step both give equal results.
It runs on SQLite, PostgreSQL and MongoDB.

Left out on purpose: negative limits, where the SDK's own backends disagree (SQLite reads
everything, Redis and the SDK's test list session nothing; this session reads nothing).
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from agents import SQLiteSession
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from threadkeep.integrations.openai_agents import ThreadkeepSession
from threadkeep.sync import SyncStore

SESSIONS = ("conv-a", "conv-b")

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
ids = st.sampled_from(["c1", "c2", "call_é"])
json_leaf = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | text
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=6,
)
items = st.one_of(
    st.builds(lambda r, c: {"role": r, "content": c}, st.sampled_from(["user", "system"]), text),
    st.builds(
        lambda t, a: {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "content": [{"type": "output_text", "text": t, "annotations": [], "logprobs": []}],
        },
        text,
        json_value,
    ),
    st.builds(
        lambda t, u: {
            "role": "user",
            "content": [{"type": "input_text", "text": t}, {"type": "input_image", "image_url": u}],
        },
        text,
        st.sampled_from(["https://example.com/a.png", "data:image/png;base64,iVBORw0K"]),
    ),
    st.builds(
        lambda i, n, a: {"type": "function_call", "call_id": i, "name": n, "arguments": a},
        ids,
        st.sampled_from(["get_weather", "lookup"]),
        text,
    ),
    st.builds(lambda i, o: {"type": "function_call_output", "call_id": i, "output": o}, ids, text),
    st.builds(
        lambda s, e: {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": s}],
            "encrypted_content": e,
        },
        text,
        text,
    ),
    st.builds(lambda v: {"type": "some_future_item", "payload": v}, json_value),
)


class Differential(RuleBasedStateMachine):
    """Both session kinds, fed the same operations; every result compared."""

    store: SyncStore
    folder: Path

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        db = self.folder / f"ref-{uuid.uuid4().hex}.db"
        user = f"diff-{uuid.uuid4().hex}"
        self.sessions = {
            name: (
                SQLiteSession(name, db),
                ThreadkeepSession(name, store=self.store, user_id=user),
            )
            for name in SESSIONS
        }

    def both(self, name: str, call: Any) -> tuple[Any, Any]:
        ref, tk = self.sessions[name]
        return self.loop.run_until_complete(call(ref)), self.loop.run_until_complete(call(tk))

    @rule(name=st.sampled_from(SESSIONS), batch=st.lists(items, max_size=3))
    def add_items(self, name: str, batch: list[dict[str, Any]]) -> None:
        ref, tk = self.both(name, lambda s: s.add_items([dict(i) for i in batch]))
        assert ref is tk is None

    @rule(name=st.sampled_from(SESSIONS), limit=st.none() | st.integers(0, 8))
    def get_items(self, name: str, limit: int | None) -> None:
        ref, tk = self.both(name, lambda s: s.get_items(limit))
        assert tk == ref

    @rule(name=st.sampled_from(SESSIONS))
    def pop_item(self, name: str) -> None:
        ref, tk = self.both(name, lambda s: s.pop_item())
        assert tk == ref

    @rule(name=st.sampled_from(SESSIONS))
    def clear_session(self, name: str) -> None:
        ref, tk = self.both(name, lambda s: s.clear_session())
        assert ref is tk is None

    def teardown(self) -> None:
        try:
            for name in SESSIONS:
                ref, tk = self.both(name, lambda s: s.get_items())
                assert tk == ref
        finally:
            for ref, _ in self.sessions.values():
                ref.close()
            self.loop.close()


def test_threadkeep_session_matches_the_sdks_sqlite_session(
    backend, tmp_path, differential_settings
) -> None:
    """Generated operation sequences give equal results on both sessions."""
    bounded = differential_settings(backend)
    with backend.sync_store() as store:
        machine = type("OnStore", (Differential,), {"store": store, "folder": tmp_path})
        run_state_machine_as_test(machine, settings=bounded)
