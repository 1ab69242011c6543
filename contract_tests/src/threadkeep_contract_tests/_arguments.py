"""Arguments at the public boundary: ids as text, bad input refused the same on every driver.

Every public ``Store`` method converts an id given as its text form to a ``UUID`` and
refuses anything else with ``InvalidArgument``; a filter or viewer given as a mapping is
validated; a naive ``datetime`` is refused. No ``TypeError``, ``AttributeError`` or pydantic
``ValidationError`` escapes, and nothing is written for refused input.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, ClassVar
from uuid import UUID

import pytest

from threadkeep import (
    Capabilities,
    ChatFilter,
    InvalidArgument,
    InvalidContent,
    Message,
    Reasoning,
    Step,
    Store,
    ToolCall,
    Viewer,
)

from ._base import ContractBase, StoreFactory

__all__ = ["ArgumentTests", "bad_calls"]

NAIVE = datetime(2026, 1, 1, 12, 0)
GARBAGE_IDS: tuple[object, ...] = ("not-a-uuid", "", 42, None, 1.5, b"\x00" * 16, ["x"])

Call = Callable[[], Awaitable[Any]]


def _id_calls(store: Store, bad: Any) -> dict[str, Call]:
    """Calls of every public method taking an id, with ``bad`` as that id."""
    return {
        "get_chat": lambda: store.get_chat(bad),
        "update_chat": lambda: store.update_chat(bad, name="n"),
        "rename_chat": lambda: store.rename_chat(bad, "n"),
        "delete_chat": lambda: store.delete_chat(bad),
        "restore_chat": lambda: store.restore_chat(bad),
        "append_message": lambda: store.append_message(bad, Message(role="user")),
        "append_messages": lambda: store.append_messages(bad, [Message(role="user")]),
        "get_message": lambda: store.get_message(bad),
        "get_message_by_agui_id": lambda: store.get_message_by_agui_id(bad, "a"),
        "update_message": lambda: store.update_message(bad, content="x"),
        "delete_messages": lambda: store.delete_messages(bad, []),
        "delete_messages[ids]": lambda: store.delete_messages(UUID(int=1), [bad]),
        "list_messages": lambda: store.list_messages(bad),
        "get_last_messages": lambda: store.get_last_messages([bad]),
        "append_tool_call": lambda: store.append_tool_call(bad, ToolCall()),
        "append_reasoning": lambda: store.append_reasoning(bad, Reasoning()),
        "update_tool_call": lambda: store.update_tool_call(bad, content="x"),
        "update_reasoning": lambda: store.update_reasoning(bad, content="x"),
        "get_tool_call": lambda: store.get_tool_call(bad),
        "get_reasoning": lambda: store.get_reasoning(bad),
        "get_tool_call_by_agui_id": lambda: store.get_tool_call_by_agui_id(bad, "a"),
        "get_reasoning_by_agui_id": lambda: store.get_reasoning_by_agui_id(bad, "a"),
        "start_over": lambda: store.start_over(bad),
        "compact": lambda: store.compact(bad, "s", 1),
        "context_messages": lambda: store.context_messages(bad),
    }


def _step_id_calls(store: Store, bad: Any) -> dict[str, Call]:
    """Calls of the step and run methods taking an id, with ``bad`` as that id."""
    return {
        "update_step": lambda: store.update_step(bad, error="x"),
        "get_step": lambda: store.get_step(bad),
        "get_steps": lambda: store.get_steps(bad, "r"),
        "get_last_incomplete_step": lambda: store.get_last_incomplete_step(bad),
        "get_run": lambda: store.get_run(bad, "r"),
        "start_run": lambda: store.start_run(bad, "r", owner="w"),
        "heartbeat_run": lambda: store.heartbeat_run(bad, "r", owner="w"),
        "finish_run": lambda: store.finish_run(bad, "r", owner="w", status="complete"),
        "claim_run": lambda: store.claim_run(bad, "r", owner="w"),
        "finalize_run_records": lambda: store.finalize_run_records(bad, "r", "complete"),
        "discard_run": lambda: store.discard_run(bad, "r"),
        "begin_run": lambda: store.begin_run(bad, "r", owner="w"),
        "end_run": lambda: store.end_run(bad, "r", owner="w", status="complete"),
    }


def bad_calls(store: Store, chat_id: UUID, message_id: UUID) -> dict[str, Call]:
    """Calls of public methods with one bad argument each (not ids), on a live chat.

    Args:
        store: The opened store.
        chat_id: A live chat's id.
        message_id: A visible message of that chat.

    Returns:
        Label -> a call that must raise ``InvalidArgument`` or ``InvalidContent``.
    """
    not_a_filter: Any = "user_id=u"
    return {
        "create_chat(user_id=int)": lambda: store.create_chat(7, "t"),  # type: ignore[arg-type]
        "create_chat(user_id='')": lambda: store.create_chat("", "t"),
        "create_chat(share=bogus)": lambda: store.create_chat("u", "t", share="bogus"),  # type: ignore[arg-type]
        "create_chat(metadata=list)": lambda: store.create_chat("u", "t", metadata=[1]),  # type: ignore[arg-type]
        "find_chat(None)": lambda: store.find_chat(None, "t"),  # type: ignore[arg-type]
        "update_chat(unknown field)": lambda: store.update_chat(chat_id, colour="red"),
        "update_chat(share=bogus)": lambda: store.update_chat(chat_id, share="bogus"),
        "rename_chat(int)": lambda: store.rename_chat(chat_id, 5),  # type: ignore[arg-type]
        "get_chat(viewer=str)": lambda: store.get_chat(chat_id, viewer="me"),  # type: ignore[arg-type]
        "get_chat(viewer={})": lambda: store.get_chat(chat_id, viewer={}),
        "get_chat(viewer typo)": lambda: store.get_chat(
            chat_id, viewer={"user_id": "admin", "tenant": "acme"}
        ),
        "list_chats(str)": lambda: store.list_chats(not_a_filter),
        "list_chats(unknown key)": lambda: store.list_chats({"colour": "red"}),
        "list_chats(naive idle_before)": lambda: store.list_chats({"idle_before": NAIVE}),
        "list_chats(naive ChatFilter)": lambda: store.list_chats({"deleted_before": NAIVE}),
        "list_chats(bad viewer)": lambda: store.list_chats({"visible_to": {"team_id": "x"}}),
        "list_chats(viewer typo)": lambda: store.list_chats(
            {"visible_to": {"user_id": "admin", "tenant": "acme"}}
        ),
        "list_chats(limit=0)": lambda: store.list_chats(limit=0),
        "list_chats(limit='5')": lambda: store.list_chats(limit="5"),  # type: ignore[arg-type]
        "list_chats(cursor=int)": lambda: store.list_chats(cursor=5),  # type: ignore[arg-type]
        "purge(naive)": lambda: store.purge(NAIVE),
        "purge(str)": lambda: store.purge("yesterday"),  # type: ignore[arg-type]
        "erase_user('')": lambda: store.erase_user(""),
        "erase_user(None)": lambda: store.erase_user(None),  # type: ignore[arg-type]
        "append_message(str)": lambda: store.append_message(chat_id, "hello"),  # type: ignore[arg-type]
        "append_message(bad role)": lambda: store.append_message(chat_id, {"role": "robot"}),
        "append_message(naive created_at)": lambda: store.append_message(
            chat_id, {"role": "user", "created_at": NAIVE}
        ),
        "append_messages(not a list)": lambda: store.append_messages(chat_id, "abc"),  # type: ignore[arg-type]
        "append_messages(None)": lambda: store.append_messages(chat_id, None),  # type: ignore[arg-type]
        "append_messages([None])": lambda: store.append_messages(chat_id, [None]),  # type: ignore[list-item]
        "update_message(seq)": lambda: store.update_message(message_id, seq=9),
        "update_message(bad status)": lambda: store.update_message(message_id, status="nope"),
        "update_message(NaN)": lambda: store.update_message(
            message_id, metadata={"x": float("nan")}
        ),
        "delete_messages(str)": lambda: store.delete_messages(chat_id, "abc"),
        "list_messages(limit=0)": lambda: store.list_messages(chat_id, limit=0),
        "list_messages(filter str)": lambda: store.list_messages(chat_id, message_filter="x"),  # type: ignore[arg-type]
        "list_messages(filter key)": lambda: store.list_messages(
            chat_id, message_filter={"colour": 1}
        ),
        "list_messages(viewer)": lambda: store.list_messages(chat_id, viewer={"user_id": ""}),
        "list_messages(viewer typo)": lambda: store.list_messages(
            chat_id, viewer={"user_id": "u-args", "team": "t"}
        ),
        "get_last_messages(str)": lambda: store.get_last_messages(str(chat_id)),
        "get_message_by_agui_id(int)": lambda: store.get_message_by_agui_id(chat_id, 5),  # type: ignore[arg-type]
        "append_tool_call(str)": lambda: store.append_tool_call(message_id, "call"),  # type: ignore[arg-type]
        "append_tool_call(bad status)": lambda: store.append_tool_call(
            message_id, {"status": "nope"}
        ),
        "append_reasoning(int)": lambda: store.append_reasoning(message_id, 3),  # type: ignore[arg-type]
        "update_tool_call(id change)": lambda: store.update_tool_call(
            message_id, tool_call_id=UUID(int=3)
        ),
        "compact(summary None)": lambda: store.compact(chat_id, None, 1),  # type: ignore[arg-type]
        "compact(upto str)": lambda: store.compact(chat_id, "s", "1"),  # type: ignore[arg-type]
        "context_messages(max 0)": lambda: store.context_messages(chat_id, max_messages=0),
        "context_messages(max str)": lambda: store.context_messages(chat_id, max_messages="2"),  # type: ignore[arg-type]
    }


def step_bad_calls(store: Store, chat_id: UUID) -> dict[str, Call]:
    """Calls of step and run methods with one bad argument each (capability ``steps``)."""
    return {
        "save_steps(str)": lambda: store.save_steps("abc"),  # type: ignore[arg-type]
        "save_steps([int])": lambda: store.save_steps([1]),  # type: ignore[list-item]
        "save_steps(bad mapping)": lambda: store.save_steps([{"chat_id": "nope"}]),  # type: ignore[list-item]
        "save_steps(NaN)": lambda: store.save_steps(
            [Step(chat_id=chat_id, run_id="r", stack_id="s", type="llm", output={"x": -1e999})]
        ),
        "get_stack_steps('')": lambda: store.get_stack_steps(""),
        "get_stack_path(None)": lambda: store.get_stack_path(None),  # type: ignore[arg-type]
        "get_steps(run None)": lambda: store.get_steps(chat_id, None),  # type: ignore[arg-type]
        "start_run(owner='')": lambda: store.start_run(chat_id, "r", owner=""),
        "start_run(lease=0)": lambda: store.start_run(chat_id, "r", owner="w", lease_seconds=0),
        "start_run(lease=nan)": lambda: store.start_run(
            chat_id, "r", owner="w", lease_seconds=float("nan")
        ),
        "start_run(lease=1e300)": lambda: store.start_run(
            chat_id, "r", owner="w", lease_seconds=1e300
        ),
        "start_run(lease=inf)": lambda: store.start_run(
            chat_id, "r", owner="w", lease_seconds=float("inf")
        ),
        "start_run(lease=10**400)": lambda: store.start_run(
            chat_id, "r", owner="w", lease_seconds=10**400
        ),
        "begin_run(lease=1e300)": lambda: store.begin_run(
            chat_id, "r", owner="w", lease_seconds=1e300
        ),
        "start_run(lease=str)": lambda: store.start_run(
            chat_id,
            "r",
            owner="w",
            lease_seconds="60",  # type: ignore[arg-type]
        ),
        "finish_run(status bogus)": lambda: store.finish_run(
            chat_id,
            "r",
            owner="w",
            status="bogus",
        ),
        "finish_run(active)": lambda: store.finish_run(chat_id, "r", owner="w", status="active"),
        "sweep_expired_runs(limit=0)": lambda: store.sweep_expired_runs(limit=0),
        "begin_run(messages str)": lambda: store.begin_run(
            chat_id,
            "r",
            owner="w",
            messages="hi",  # type: ignore[arg-type]
        ),
        "end_run(metadata list)": lambda: store.end_run(
            chat_id,
            "r",
            owner="w",
            status="complete",
            metadata=[1],  # type: ignore[arg-type]
        ),
        "end_run(metadata NaN)": lambda: store.end_run(
            chat_id, "r", owner="w", status="complete", metadata={"x": float("inf")}
        ),
        "end_run(steps str)": lambda: store.end_run(
            chat_id,
            "r",
            owner="w",
            status="complete",
            steps="abc",  # type: ignore[arg-type]
        ),
        "finalize_run_records(bogus)": lambda: store.finalize_run_records(chat_id, "r", "bogus"),
    }


async def _refused(label: str, call: Call) -> None:
    try:
        await call()
    except (InvalidArgument, InvalidContent):
        return
    except Exception as exc:  # noqa: BLE001 - the point: which type escaped
        pytest.fail(f"{label} raised {type(exc).__name__}: {exc}, not InvalidArgument")
    pytest.fail(f"{label} was accepted, not refused with InvalidArgument")


class ArgumentTests(ContractBase):
    """Ids as text, garbage ids, and bad arguments to every public method."""

    contract_area: ClassVar[str] = "Arguments"

    @pytest.mark.asyncio
    async def test_ids_given_as_text_work_everywhere(
        self, store: Store, capabilities: Capabilities
    ) -> None:
        """Every method taking an id accepts its text form and returns the same records."""
        chat = await store.create_chat("u-args", "t-text-ids")
        cid = str(chat.chat_id)
        message = await store.append_message(
            cid,
            Message(
                role="assistant",
                agui_id="m",
                tool_calls=[ToolCall(agui_id="c")],
                reasonings=[Reasoning(agui_id="r")],
            ),
        )
        assert message.chat_id == chat.chat_id
        assert isinstance(message.chat_id, UUID)
        mid = str(message.message_id)
        call_id = str(message.tool_calls[0].tool_call_id)
        thought_id = str(message.reasonings[0].reasoning_id)
        assert (await store.get_chat(cid)).chat_id == chat.chat_id
        assert (await store.get_chat(cid.upper())).chat_id == chat.chat_id
        assert (await store.get_message(mid)).message_id == message.message_id
        assert (await store.get_tool_call(call_id)).agui_id == "c"
        assert (await store.get_reasoning(thought_id)).agui_id == "r"
        assert (await store.update_tool_call(call_id, content="done")).content == "done"
        assert (await store.update_reasoning(thought_id, content="hm")).content == "hm"
        assert (await store.append_tool_call(mid, {"agui_id": "c2"})).agui_id == "c2"
        assert (await store.append_reasoning(mid, {"agui_id": "r2"})).agui_id == "r2"
        assert (await store.update_message(mid, content="x")).content == "x"
        assert (await store.get_message_by_agui_id(cid, "m")) is not None
        assert (await store.get_tool_call_by_agui_id(cid, "c")) is not None
        assert (await store.get_reasoning_by_agui_id(cid, "r")) is not None
        page = await store.list_messages(cid, message_filter={"roles": ["assistant"]})
        assert [m.message_id for m in page.items] == [message.message_id]
        assert list(await store.get_last_messages([cid])) == [chat.chat_id]
        assert (await store.rename_chat(cid, "renamed")).name == "renamed"
        other = await store.append_message(cid, {"role": "user", "content": "y"})
        assert await store.start_over(cid) is not None
        assert await store.context_messages(cid) == []
        last = await store.append_message(cid, {"role": "user", "content": "z"})
        assert last.seq is not None
        assert (await store.compact(cid, "summary", last.seq)).content == "summary"
        assert await store.delete_messages(cid, [str(other.message_id)]) == 1
        assert (await store.delete_chat(cid)).deleted_at is not None
        assert (await store.restore_chat(cid)).deleted_at is None
        if capabilities.steps:
            step = Step(chat_id=chat.chat_id, run_id="run", stack_id="s", type="llm")
            (saved,) = await store.save_steps([step])
            assert (await store.get_step(str(saved.step_id))).step_id == saved.step_id
            assert (await store.update_step(str(saved.step_id), error="e")).error == "e"
            assert [s.step_id for s in await store.get_steps(cid, "run")] == [saved.step_id]
            assert (await store.get_last_incomplete_step(cid)) is not None
            run = await store.start_run(cid, "run", owner="w")
            assert run.chat_id == chat.chat_id
            assert (await store.heartbeat_run(cid, "run", owner="w")).owner == "w"
            assert (await store.get_run(cid, "run")).run_id == "run"
            finished = await store.finish_run(cid, "run", owner="w", status="interrupted")
            assert finished.status == "interrupted"
            assert (await store.claim_run(cid, "run", owner="w2")).owner == "w2"

    @pytest.mark.asyncio
    @pytest.mark.parametrize("bad", GARBAGE_IDS, ids=repr)
    async def test_garbage_ids_are_invalid_arguments(
        self, store: Store, capabilities: Capabilities, bad: object
    ) -> None:
        """A malformed id raises ``InvalidArgument`` from every method, and nothing else."""
        chat = await store.create_chat("u-args", "t-garbage")
        calls = _id_calls(store, bad)
        if capabilities.steps:
            calls |= _step_id_calls(store, bad)
        for label, call in calls.items():
            await _refused(label, call)
        assert await self.raw_messages(store, chat.chat_id) == []

    @pytest.mark.asyncio
    async def test_bad_arguments_are_refused_cleanly(
        self, store: Store, capabilities: Capabilities
    ) -> None:
        """Bad arguments raise ``InvalidArgument``/``InvalidContent``; nothing is written.

        No ``TypeError``, ``AttributeError`` or pydantic ``ValidationError`` escapes a
        public method: filters and viewers given as mappings are validated, naive
        datetimes are refused.
        """
        chat = await store.create_chat("u-args", "t-bad")
        message = await store.append_message(chat.chat_id, Message(role="assistant"))
        chats_before = len(await self.raw_chats(store))
        calls = bad_calls(store, chat.chat_id, message.message_id)
        if capabilities.steps:
            calls |= step_bad_calls(store, chat.chat_id)
        for label, call in calls.items():
            await _refused(label, call)
        (row,) = await self.raw_messages(store, chat.chat_id)
        assert row.message_id == message.message_id
        assert row.body.get("metadata") == {}, "a refused update was written"
        assert len(await self.raw_chats(store)) == chats_before
        assert (await store.get_message(message.message_id)).tool_calls == []

    @pytest.mark.parametrize(
        "options",
        [
            {"bogus": 1},
            {"max_message_bytes": "x"},
            {"max_message_bytes": 0},
            {"cursor_secret": 5},
            {"clock": "x"},
            {"message_model": int},
            {"chat_model": "Chat"},
        ],
        ids=repr,
    )
    def test_bad_store_options_are_invalid_arguments(
        self, store_factory: StoreFactory, options: dict[str, Any]
    ) -> None:
        """An unknown option, or a common one of the wrong kind, raises ``InvalidArgument``.

        ``open_store(url, **options)`` builds the store with them: no ``TypeError`` or
        ``AttributeError`` escapes.
        """
        with pytest.raises(InvalidArgument):
            store_factory(**options)

    @pytest.mark.asyncio
    async def test_filters_and_viewers_given_as_mappings(self, store: Store) -> None:
        """``list_chats``/``get_chat``/``list_messages`` accept mappings of their models."""
        chat = await store.create_chat("u-map", "t-map", tenant_id="tm")
        await store.append_message(chat.chat_id, Message(role="user", content="hi"))
        listed = await store.list_chats({"user_id": "u-map", "tenant_id": "tm"})
        assert [c.chat_id for c in listed.items] == [chat.chat_id]
        assert listed == await store.list_chats(ChatFilter(user_id="u-map", tenant_id="tm"))
        viewer = {"user_id": "u-map", "tenant_id": "tm"}
        assert (await store.get_chat(chat.chat_id, viewer=viewer)).chat_id == chat.chat_id
        page = await store.list_messages(chat.chat_id, viewer=Viewer(**viewer))
        assert [m.content for m in page.items] == ["hi"]
