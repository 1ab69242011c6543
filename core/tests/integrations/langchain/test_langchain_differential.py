"""Differential conformance: ``ThreadkeepChatMessageHistory`` against LangChain's own history.

``langchain_core.chat_history.InMemoryChatMessageHistory`` (shipped in the installed
``langchain-core``) is the reference. A Hypothesis state machine gives two histories of each
kind (two session ids on one store, so isolation is checked too) the same generated
operations, through the sync and the async methods alike: adding zero to three messages
(``HumanMessage`` in unicode and with content blocks, ``AIMessage`` with ``tool_calls``,
``usage_metadata``, ``additional_kwargs`` and ids, ``ToolMessage`` with ``tool_call_id``,
``status`` and ``artifact``, ``SystemMessage``, ``ChatMessage`` with a custom role), reading
the messages, and clearing; after every step both give equal messages. It runs on SQLite,
PostgreSQL and MongoDB.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test
from langchain_core.chat_history import BaseChatMessageHistory, InMemoryChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from threadkeep.integrations.langchain import ThreadkeepChatMessageHistory

# The reference is deprecated (LangChain points to LangGraph persistence); it is still
# the history behaviour `RunnableWithMessageHistory` users rely on.
pytestmark = pytest.mark.filterwarnings(
    "ignore:The class `InMemoryChatMessageHistory` was deprecated"
    ":langchain_core._api.deprecation.LangChainDeprecationWarning"
)

SESSIONS = ("conv-a", "conv-b")

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
json_leaf = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | text
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=6,
)
call_ids = st.sampled_from(["call_1", "call_2", "call_é"])
tool_call = st.builds(
    lambda i, n, a: {"id": i, "name": n, "args": a, "type": "tool_call"},
    call_ids,
    st.sampled_from(["get_weather", "lookup"]),
    st.dictionaries(text, json_value, max_size=3),
)
usage = st.builds(
    lambda i, o: {"input_tokens": i, "output_tokens": o, "total_tokens": i + o},
    st.integers(0, 10_000),
    st.integers(0, 10_000),
)
messages = st.one_of(
    st.builds(HumanMessage, content=text),
    st.builds(
        lambda t, u: HumanMessage(
            content=[{"type": "text", "text": t}, {"type": "image_url", "image_url": {"url": u}}]
        ),
        text,
        st.sampled_from(["https://example.com/a.png", "data:image/png;base64,iVBORw0K"]),
    ),
    st.builds(
        lambda c, calls, u, kw, i: AIMessage(
            content=c, tool_calls=calls, usage_metadata=u, additional_kwargs=kw, id=i
        ),
        text,
        st.lists(tool_call, max_size=2),
        st.none() | usage,
        st.dictionaries(st.sampled_from(["refusal", "x"]), json_value, max_size=2),
        st.none() | st.sampled_from(["run-1", "msg_é"]),
    ),
    st.builds(
        lambda c, i, s, a: ToolMessage(content=c, tool_call_id=i, status=s, artifact=a),
        text,
        call_ids,
        st.sampled_from(["success", "error"]),
        json_value,
    ),
    st.builds(SystemMessage, content=text),
    st.builds(ChatMessage, content=text, role=st.sampled_from(["critic", "user"])),
)


class Differential(RuleBasedStateMachine):
    """Both history kinds, fed the same operations; every read compared."""

    make_history: Any

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.histories: dict[str, tuple[BaseChatMessageHistory, BaseChatMessageHistory]] = {
            name: (InMemoryChatMessageHistory(), self.make_history(name)) for name in SESSIONS
        }

    def pair(self, name: str) -> tuple[BaseChatMessageHistory, BaseChatMessageHistory]:
        return self.histories[name]

    @rule(name=st.sampled_from(SESSIONS), batch=st.lists(messages, max_size=3), aio=st.booleans())
    def add(self, name: str, batch: list[BaseMessage], aio: bool) -> None:
        for history in self.pair(name):
            copies = [m.model_copy(deep=True) for m in batch]
            if aio:
                self.loop.run_until_complete(history.aadd_messages(copies))
            else:
                history.add_messages(copies)

    @rule(name=st.sampled_from(SESSIONS), aio=st.booleans())
    def read(self, name: str, aio: bool) -> None:
        ref, tk = self.pair(name)
        if aio:
            assert self.loop.run_until_complete(tk.aget_messages()) == ref.messages
        else:
            assert tk.messages == ref.messages

    @rule(name=st.sampled_from(SESSIONS), aio=st.booleans())
    def clear(self, name: str, aio: bool) -> None:
        for history in self.pair(name):
            if aio:
                self.loop.run_until_complete(history.aclear())
            else:
                history.clear()

    def teardown(self) -> None:
        try:
            for name in SESSIONS:
                ref, tk = self.pair(name)
                assert tk.messages == ref.messages
        finally:
            self.loop.close()


def test_threadkeep_history_matches_langchains_in_memory_history(
    module_backend, differential_settings
) -> None:
    """Generated operation sequences give equal messages on both histories."""
    bounded = differential_settings(module_backend)
    with module_backend.sync_store() as store:

        def make(session_id: str) -> ThreadkeepChatMessageHistory:
            owner = f"lc-diff-{uuid.uuid4().hex}"  # a fresh chat for each machine run
            return ThreadkeepChatMessageHistory(session_id, store=store, user_id=owner)

        machine = type("OnStore", (Differential,), {"make_history": staticmethod(make)})
        run_state_machine_as_test(machine, settings=bounded)
