"""``ThreadkeepConversationStore`` against Pydantic AI's ``InMemoryConversationStore``.

The same script of ``ConversationStore`` calls (save, load with limits and scopes, stale and
unloaded saves, branch by count and back to a left branch's entry, fork, list by scope and
limit, delete, re-create) runs on Pydantic AI's reference store and on threadkeep's, on
SQLite, PostgreSQL and MongoDB, and every observation must be equal: the messages, usage and
scope of what loads, the entries' messages and links (entry ids are minted at random by the
shared base class, so links are compared by position), the branches left, the exception types.
Then concurrent saves of one loaded conversation (exactly one wins) and a real agent run.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from pydantic import TypeAdapter
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
    InMemoryConversationStore,
)
from pydantic_ai.exceptions import CallDeferred, UserError
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.tools import DeferredToolRequests
from pydantic_ai.usage import RunUsage

from threadkeep import Role
from threadkeep.integrations.pydantic_ai import ThreadkeepConversationStore


def _turn(i: int) -> list[Any]:
    return [
        ModelRequest(parts=[UserPromptPart(f"question {i} ünï")]),
        ModelResponse(parts=[TextPart(f"answer {i}")]),
    ]


TURNS = [_turn(i) for i in range(4)]


def _shape(entries: list[ConversationEntry] | None) -> Any:
    """Entries as (message, index of the parent in the list or 'outside'/None)."""
    if entries is None:
        return None
    index = {entry.id: i for i, entry in enumerate(entries)}
    return [
        (e.message, None if e.parent_id is None else index.get(e.parent_id, "outside"))
        for e in entries
    ]


async def _outcome(call: Any) -> Any:
    try:
        return ("ok", await call)
    except (ConversationConflict, UserError, KeyError) as error:  # the type is the observation
        return ("raised", type(error).__name__)


async def _script(store: ConversationStore) -> list[Any]:
    seen: list[Any] = []
    first = Conversation(conversation_id="c1", messages=[*TURNS[0]], usage=RunUsage(requests=1))
    seen.append(_shape(await store.save(first, scope="ann")))
    loaded = await store.load("c1")
    assert loaded is not None
    seen.append((loaded.messages, loaded.usage, loaded.conversation_id))
    stale = await store.load("c1")
    loaded.messages.extend(TURNS[1])
    seen.append(_shape(await store.save(loaded)))
    assert stale is not None
    stale.messages.extend(TURNS[2])
    seen.append(await _outcome(store.save(stale)))  # saved since it was loaded
    seen.append(await _outcome(store.save(Conversation(conversation_id="c1"))))  # not loaded
    seen.append(_shape(await store.load_entries("c1")))
    seen.append(_shape(await store.load_entries("c1", limit=3)))
    seen.append(await store.load("c1", scope="bob"))
    seen.append(await _outcome(store.load("c1", limit=-1)))
    # Branch back to two messages, continue there, then back to the left branch's tip.
    current = await store.load("c1")
    assert current is not None
    branched = await store.branch("c1", at=2, expected_revision=current.revision)
    seen.append(branched.messages)
    branched.messages.extend(TURNS[3])
    seen.append(_shape(await store.save(branched)))
    record = await store.read_record("c1")
    assert record is not None
    seen.append(len(record.branches))
    old_tip = (await store.read_history(record.branches[-1]))[-1]
    back = await store.branch("c1", from_entry=old_tip.id, expected_revision=record.revision)
    seen.append(back.messages)
    seen.append(await _outcome(store.branch("c1", at=99, expected_revision=back.revision)))
    # Fork at three messages: shares the entries, continues on its own.
    fork = await store.fork("c1", at=3, new_conversation_id="f1", scope="bob")
    seen.append((fork.messages, fork.usage))
    fork.messages.append(TURNS[2][0])
    seen.append(_shape(await store.save(fork)))
    seen.append(await _outcome(store.fork("c1", new_conversation_id="f1")))  # exists
    listed = await store.list_conversations()
    seen.append([(r.conversation_id, r.scope, r.forked_from) for r in listed])
    seen.append([r.conversation_id for r in await store.list_conversations(scope="bob")])
    seen.append([r.conversation_id for r in await store.list_conversations(limit=1)])
    # Delete: gone for load and list; the fork still loads; the id can be used again.
    await store.delete("c1", scope="bob")  # another scope: left as it is
    seen.append((await store.load("c1")) is not None)
    await store.delete("c1")
    seen.append(await store.load("c1"))
    forked = await store.load("f1")
    assert forked is not None
    seen.append(forked.messages)
    seen.append(_shape(await store.save(Conversation(conversation_id="c1", messages=TURNS[3]))))
    again = await store.load("c1")
    assert again is not None
    seen.append((again.messages, again.usage))
    seen.append(await _outcome(store.delete_record("c1", expected_revision="not-it")))
    return seen


async def test_the_script_observes_the_same_on_threadkeep_as_on_the_reference(backend) -> None:
    expected = await _script(InMemoryConversationStore())
    async with backend.store() as tk:
        got = await _script(ThreadkeepConversationStore(tk))
    for step, (want, have) in enumerate(zip(expected, got, strict=True)):
        assert have == want, f"step {step}"


async def test_of_concurrent_saves_of_one_loaded_conversation_exactly_one_wins(backend) -> None:
    with backend.sync_store() as tk:
        store = ThreadkeepConversationStore(tk)
        await store.save(Conversation(conversation_id="c", messages=[*TURNS[0]]))
        for round_ in range(4):
            copies = [await store.load("c") for _ in range(3)]
            for i, copy in enumerate(copies):
                assert copy is not None
                copy.messages.append(ModelRequest(parts=[UserPromptPart(f"r{round_} w{i}")]))
            results = await asyncio.gather(
                *(store.save(c) for c in copies if c is not None), return_exceptions=True
            )
            errors = [r for r in results if isinstance(r, BaseException)]
            assert len(errors) == 2, results
            assert all(isinstance(e, ConversationConflict) for e in errors)
        final = await store.load("c")
        assert final is not None
        assert len(final.messages) == 2 + 4


async def test_a_new_conversation_saved_twice_at_once_is_created_once(backend) -> None:
    with backend.sync_store() as tk:
        store = ThreadkeepConversationStore(tk)
        results = await asyncio.gather(
            *(store.save(Conversation(conversation_id="new", messages=TURNS[i])) for i in range(3)),
            return_exceptions=True,
        )
        assert sum(not isinstance(r, BaseException) for r in results) == 1, results
        assert len(await store.list_conversations()) == 1


async def test_an_agent_run_continues_a_stored_conversation_across_stores(backend) -> None:
    agent = Agent(TestModel(custom_output_text="noted"))
    with backend.sync_store() as tk:
        store = ThreadkeepConversationStore(tk)
        conversation = await store.load("chat") or Conversation(conversation_id="chat")
        await store.save(await agent.run("first", conversation=conversation))
    with backend.sync_store() as tk:  # a new process, as far as the store goes
        store = ThreadkeepConversationStore(tk)
        conversation = await store.load("chat")
        assert conversation is not None
        result = await agent.run("second", conversation=conversation)
        await store.save(result)
        final = await store.load("chat")
        assert final is not None
        assert final.messages == result.all_messages()
        assert final.usage == result.conversation.usage
        # Readable through the plain threadkeep API: one chat of entries, typed by role.
        entries = await asyncio.to_thread(tk.find_chat, "pydantic-ai", "pydantic-ai/entries")
        assert entries is not None
        page = await asyncio.to_thread(tk.list_messages, entries.chat_id)
        assert [m.role for m in page.items] == [Role.USER, Role.ASSISTANT] * 2


def test_an_empty_user_id_or_namespace_is_refused() -> None:
    from threadkeep import InvalidArgument

    with pytest.raises(InvalidArgument):
        ThreadkeepConversationStore("sqlite+aiosqlite:///:memory:", user_id="")
    with pytest.raises(InvalidArgument):
        ThreadkeepConversationStore("sqlite+aiosqlite:///:memory:", namespace="")


async def test_a_losing_record_not_yet_taken_back_is_never_the_record(backend) -> None:
    """A save that lost but has not yet taken its record back (crashed, or a reader came in
    between) is ignored by readers, and a save built on it loses too."""
    with backend.sync_store() as tk:
        store = ThreadkeepConversationStore(tk)
        await store.save(Conversation(conversation_id="c", messages=[*TURNS[0]]))
        base = await store.read_record("c")
        winner = await store.load("c")
        assert base is not None
        assert winner is not None
        winner.messages.extend(TURNS[1])
        await store.save(winner)
        # A second save from `base` that stored its record and stopped there.
        chat = await asyncio.to_thread(tk.find_chat, "pydantic-ai", "pydantic-ai/conversation/c")
        assert chat is not None
        loser = dataclasses.replace(base, revision="loser-revision")
        await asyncio.to_thread(
            tk.append_message,
            chat.chat_id,
            {
                "role": Role.SYSTEM,
                "content": TypeAdapter(ConversationRecord).dump_json(loser).decode(),
                "metadata": {"based_on": base.revision},
            },
        )
        current = await store.read_record("c")
        assert current is not None
        assert current.revision == winner.revision
        on_loser = Conversation(conversation_id="c", messages=[*TURNS[0]], revision=loser.revision)
        on_loser.messages.extend(TURNS[2])
        with pytest.raises(ConversationConflict):
            await store.save(on_loser)
        reloaded = await store.load("c")
        assert reloaded is not None
        assert reloaded.messages == [*TURNS[0], *TURNS[1]]
        reloaded.messages.extend(TURNS[3])
        await store.save(reloaded)  # the winner's line goes on
        final = await store.load("c")
        assert final is not None
        assert final.messages == [*TURNS[0], *TURNS[1], *TURNS[3]]


def _refund_agent() -> Agent[None, str | DeferredToolRequests]:
    """An agent whose first run pauses on a call needing approval and one run elsewhere."""

    def llm(messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[
                    ToolCallPart("refund", {"amount": 10}, tool_call_id="refund-1"),
                    ToolCallPart("look_up_order", {}, tool_call_id="lookup-1"),
                ]
            )
        return ModelResponse(parts=[TextPart("Refunded order 42.")])

    agent = Agent(FunctionModel(llm), output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def refund(amount: int) -> str:
        return f"refunded {amount}"

    @agent.tool_plain
    def look_up_order() -> str:
        raise CallDeferred(metadata={"queue": "orders"})

    return agent


async def test_a_paused_conversation_resumes_from_the_store_alone(backend) -> None:
    agent = _refund_agent()
    with backend.sync_store() as tk:
        store = ThreadkeepConversationStore(tk)
        paused = await agent.run("Refund my order.")
        assert isinstance(paused.output, DeferredToolRequests)
        await store.save(paused)
        conversation = await store.load(paused.conversation.conversation_id)
        assert conversation is not None
        assert conversation.deferred_tool_requests == paused.output
        results = paused.output.build_results(approve_all=True, calls={"lookup-1": "order 42"})
        resumed = await agent.run(conversation=conversation, deferred_tool_results=results)
        assert resumed.output == "Refunded order 42."
        await store.save(resumed)
        final = await store.load(paused.conversation.conversation_id)
        assert final is not None
        assert final.deferred_tool_requests is None
        assert final.messages == resumed.all_messages()


async def test_bytes_keep_the_fidelity_of_the_messages_adapter(backend) -> None:
    image = BinaryContent(data=bytes([0x89, 0xFF, 0x00, 0x10]), media_type="image/png")
    messages: list[ModelMessage] = [
        ModelRequest(
            parts=[
                ToolReturnPart("read_file", bytes([0xFF, 0xFE]), tool_call_id="c1"),
                UserPromptPart(content=["What is in this image?", image]),
            ]
        )
    ]
    expected = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(messages))
    with backend.sync_store() as tk:
        store = ThreadkeepConversationStore(tk)
        await store.save(Conversation(conversation_id="bytes", messages=messages))
        loaded = await store.load("bytes")
        assert loaded is not None
        assert loaded.messages == expected


async def test_a_save_and_a_delete_of_one_revision_at_once_one_wins(backend) -> None:
    """A delete is a compare-and-set like a save: of a save and a delete both expecting one
    revision, exactly one succeeds (both did, and the save that reported success was lost
    with the deleted chat)."""
    async with backend.store() as tk:
        store = ThreadkeepConversationStore(tk)
        for round_ in range(8):
            cid = f"c{round_}"
            await store.save(Conversation(conversation_id=cid, messages=[*TURNS[0]]))
            loaded = await store.load(cid)
            assert loaded is not None
            revision = loaded.revision
            assert revision is not None
            loaded.messages.extend(TURNS[1])

            async def delete(delay: int, cid: str = cid, revision: str = revision) -> None:
                for _ in range(delay):
                    await asyncio.sleep(0)  # a different interleaving each round
                await store.delete_record(cid, expected_revision=revision)

            saved, deleted = await asyncio.gather(
                store.save(loaded), delete(round_), return_exceptions=True
            )
            outcomes = [not isinstance(r, BaseException) for r in (saved, deleted)]
            assert outcomes.count(True) == 1, (round_, saved, deleted)
            errors = [r for r in (saved, deleted) if isinstance(r, BaseException)]
            assert all(isinstance(e, ConversationConflict) for e in errors), errors
            after = await store.load(cid)
            if outcomes[0]:
                assert after is not None
                assert after.messages == [*TURNS[0], *TURNS[1]]
            else:
                assert after is None
