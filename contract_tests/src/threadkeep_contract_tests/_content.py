"""Content fidelity: everything written reads back equal, or is refused."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, Field

from threadkeep import (
    DEFAULT_MAX_MESSAGE_BYTES,
    ActionPart,
    CustomPart,
    ErrorPart,
    FilePart,
    IdempotencyConflict,
    ImagePart,
    InvalidContent,
    Message,
    PayloadTooLarge,
    Reasoning,
    Store,
    ToolCall,
)

from ._base import ContractBase, StoreFactory
from ._helpers import acebench_dialogues, body_of, opened, walk_messages

__all__ = ["ContentTests", "ContractMessage", "RichReasoning", "RichToolCall"]

NUL = "\x00"
LONE_SURROGATE = "\ud800"
UNICODE_SAMPLES = (
    "plain ascii",
    "emoji 😀🎉 family 👨‍👩‍👧‍👦 flag 🇯🇵 skin 👍🏽",
    "CJK 中文 日本語 한국어 𠜎𠜱 (astral ideographs)",
    "combining e\u0301 vs \u00e9, RTL \u05e9\u05dc\u05d5\u05dd, BOM \ufeff, ZWJ \u200d",
    f"control {NUL} \x01 \x1f \x7f \u2028 \u2029 tab\t cr\r lf\n",
    "max \U0010ffff private \ue000 nonchar \ufffe\uffff",
    "",
)
TOOL_ARGUMENTS = (
    '{"b": 1, "a": 2}',
    '{ "spaced" :  true ,\n\t"nested": {"k": [1, 2, 3]} }\n',
    '{"dup": 1, "dup": 2}',
    '{"escaped": "\\u00e9\\n\\u0000", "raw": "é"}',
    '{"big": 123456789012345678901234567890, "exp": 1e400, "neg0": -0, "f": 1.0}',
    '{"truncated": ',
    "not json at all\r\n",
    "",
)


class AuditInfo(BaseModel):
    """A nested model inside a user-defined message field."""

    actor: str
    reasons: list[str] = Field(default_factory=list)


class RichToolCall(ToolCall):
    """A user ``ToolCall`` subclass with its own field."""

    cost_usd: float = 0.0


class RichReasoning(Reasoning):
    """A user ``Reasoning`` subclass with its own field."""

    model_name: str | None = None


class ContractMessage(Message):
    """A user ``Message`` subclass: declared fields, nested models, typed nested lists."""

    priority: int = 0
    audit: AuditInfo | None = None
    tool_calls: list[RichToolCall] = Field(default_factory=list)  # type: ignore[assignment]
    reasonings: list[RichReasoning] = Field(default_factory=list)  # type: ignore[assignment]


class ContentTests(ContractBase):
    """NUL, CJK, emoji, big bodies, exact tool-call arguments, user fields; surrogates refused."""

    contract_area: ClassVar[str] = "Content fidelity"

    async def _round_trip(self, store: Store, message: Message) -> Message:
        chat = await store.create_chat("u-content", f"t-{message.message_id}")
        stored = await store.append_message(chat.chat_id, message)
        read = await store.get_message(stored.message_id)
        (paged,) = (await store.list_messages(chat.chat_id)).items
        assert body_of(stored) == body_of(message), "append returned another body"
        assert body_of(read) == body_of(message), "get_message read another body"
        assert body_of(paged) == body_of(message), "list_messages read another body"
        (row,) = await self.raw_messages(store, chat.chat_id)
        assert row.content == message.content, "the stored row holds other content"
        return read

    @pytest.mark.asyncio
    @pytest.mark.parametrize("text", UNICODE_SAMPLES, ids=lambda t: repr(t[:12]))
    async def test_text_round_trips_exactly(self, store: Store, text: str) -> None:
        """Content, names, arguments and metadata holding NUL, emoji, CJK... read back equal."""
        call = ToolCall(agui_id=f"c{text}", name=text, arguments=text, content=text)
        thought = Reasoning(content=text, encrypted_value=text, name=text)
        message = Message(
            role="assistant",
            content=text,
            tool_calls=[call],
            reasonings=[thought],
            metadata={text: text, "list": [text, {"nested": text}]},
            parts=[CustomPart(name="n", value=text)],
            block_id=text or None,
        )
        read = await self._round_trip(store, message)
        assert read.content == text
        assert read.tool_calls[0].arguments == text

    @pytest.mark.asyncio
    async def test_nul_character_stored_exactly(self, store: Store) -> None:
        """U+0000 is stored and read back exactly (PostgreSQL text/jsonb reject it raw)."""
        content = f"{NUL}start{NUL}{NUL}middle\\u0000literal{NUL}"
        read = await self._round_trip(store, Message(role="user", content=content))
        assert read.content.count(NUL) == 4
        assert "\\u0000" in read.content

    @pytest.mark.asyncio
    async def test_lone_surrogate_is_refused(self, store: Store) -> None:
        """A lone UTF-16 surrogate anywhere raises ``InvalidContent`` and writes nothing."""
        chat = await store.create_chat("u-content", "t-surrogate")
        bad = f"a{LONE_SURROGATE}b"
        cases: list[Message] = [
            Message(role="user", content=bad),
            Message(role="user", metadata={"k": bad}),
            Message(role="assistant", tool_calls=[ToolCall(arguments=bad)]),
            Message(role="assistant", reasonings=[Reasoning(content=bad)]),
            Message(role="user", content="fine", run_id=bad),
        ]
        for message in cases:
            with pytest.raises(InvalidContent):
                await store.append_message(chat.chat_id, message)
            with pytest.raises(InvalidContent):
                await store.append_messages(chat.chat_id, [Message(role="user"), message])
        assert await self.raw_messages(store, chat.chat_id) == []
        holder = await store.append_message(chat.chat_id, Message(role="assistant"))
        with pytest.raises(InvalidContent):
            await store.append_tool_call(holder.message_id, ToolCall(arguments=bad))
        with pytest.raises(InvalidContent):
            await store.update_message(holder.message_id, content=bad)
        assert (await store.get_message(holder.message_id)).tool_calls == []
        with pytest.raises(InvalidContent):
            await store.create_chat("u-content", "t-bad-name", name=bad)
        assert await store.find_chat("u-content", "t-bad-name") is None

    @pytest.mark.asyncio
    async def test_unstorable_values_and_keys_are_refused(self, store: Store) -> None:
        """A value with no JSON form, or a lone surrogate in a key, raises ``InvalidContent``.

        Identical for chats and messages; the error names the field; nothing is written.
        """
        chat = await store.create_chat("u-content", "t-unstorable")
        holder = await store.append_message(chat.chat_id, Message(role="user", content="x"))
        key = f"k{LONE_SURROGATE}"
        for metadata in ({"x": object()}, {"x": b"\xff"}, {key: 1}, {"deep": [{key: "v"}]}):
            with pytest.raises(InvalidContent, match=r"chat\.metadata"):
                await store.create_chat("u-content", "t-unstorable-2", metadata=metadata)
            with pytest.raises(InvalidContent, match=r"chat\.metadata"):
                await store.update_chat(chat.chat_id, metadata=metadata)
            with pytest.raises(InvalidContent, match=r"message\.metadata"):
                await store.append_message(chat.chat_id, {"role": "user", "metadata": metadata})
            with pytest.raises(InvalidContent, match=r"message\.metadata"):
                await store.update_message(holder.message_id, metadata=metadata)
            with pytest.raises(InvalidContent, match=r"tool_call\.metadata"):
                await store.append_tool_call(holder.message_id, {"metadata": metadata})
        with pytest.raises(InvalidContent, match=r"message\.agui_id"):
            await store.append_message(chat.chat_id, {"role": "user", "agui_id": f"id{key}"})
        assert await store.find_chat("u-content", "t-unstorable-2") is None
        assert (await store.get_chat(chat.chat_id)).metadata == {}
        (row,) = await self.raw_messages(store, chat.chat_id)
        assert row.body["metadata"] == {}
        assert row.body["tool_calls"] == []

    @pytest.mark.asyncio
    async def test_max_size_message_is_accepted(self, store: Store) -> None:
        """A message of exactly 16 MiB (UTF-8 bytes) is stored and read back equal."""
        emoji = "😀"  # 4 bytes in UTF-8: the limit counts bytes, not characters
        content = "x" * (DEFAULT_MAX_MESSAGE_BYTES - 4) + emoji
        assert len(content.encode("utf-8")) == DEFAULT_MAX_MESSAGE_BYTES
        chat = await store.create_chat("u-content", "t-16mib")
        stored = await store.append_message(chat.chat_id, Message(role="user", content=content))
        read = await store.get_message(stored.message_id)
        assert read.content == content
        (row,) = await self.raw_messages(store, chat.chat_id)
        assert row.content == content

    @pytest.mark.asyncio
    async def test_max_size_nul_message_is_accepted(self, store: Store) -> None:
        """16 MiB of U+0000 is accepted and read back: the limit counts text, not JSON.

        JSON escapes U+0000 as six characters, so the encoded body is six times the
        payload; the escaping never counts against ``max_message_bytes``. One byte more is
        still ``PayloadTooLarge``.
        """
        content = NUL * DEFAULT_MAX_MESSAGE_BYTES
        chat = await store.create_chat("u-content", "t-16mib-nul")
        with pytest.raises(PayloadTooLarge):
            await store.append_message(chat.chat_id, Message(role="user", content=content + NUL))
        assert await self.raw_messages(store, chat.chat_id) == []
        stored = await store.append_message(chat.chat_id, Message(role="user", content=content))
        read = await store.get_message(stored.message_id)
        assert read.content == content
        (row,) = await self.raw_messages(store, chat.chat_id)
        assert row.content == content
        del content, read, row

    @pytest.mark.asyncio
    async def test_non_finite_numbers_are_refused(self, store: Store) -> None:
        """NaN and infinity anywhere in a record raise ``InvalidContent``; nothing is written.

        JSON has no form for them: stored, they would read back as something else.
        """
        chat = await store.create_chat("u-content", "t-nan")
        nan, inf = float("nan"), float("inf")
        cases: list[Message] = [
            Message(role="user", metadata={"score": nan}),
            Message(role="user", metadata={"deep": [1, {"x": -inf}]}),
            Message(role="user", parts=[ActionPart(name="a", payload={"p": inf})]),
            Message(role="user", parts=[CustomPart(name="c", value=[nan])]),
            Message(role="assistant", tool_calls=[RichToolCall(cost_usd=nan)]),
            Message(role="user", undeclared={"n": inf}),
        ]
        for message in cases:
            with pytest.raises(InvalidContent):
                await store.append_message(chat.chat_id, message)
            with pytest.raises(InvalidContent):
                await store.append_messages(chat.chat_id, [Message(role="user"), message])
        with pytest.raises(InvalidContent):
            await store.append_message(chat.chat_id, {"role": "user", "metadata": {"x": nan}})
        assert await self.raw_messages(store, chat.chat_id) == []
        holder = await store.append_message(chat.chat_id, Message(role="assistant"))
        with pytest.raises(InvalidContent):
            await store.update_message(holder.message_id, metadata={"x": -inf})
        with pytest.raises(InvalidContent):
            await store.append_tool_call(holder.message_id, RichToolCall(cost_usd=inf))
        with pytest.raises(InvalidContent):
            await store.append_tool_call(
                holder.message_id, {"name": "f", "arguments": "{}", "metadata": {"a": inf}}
            )
        with pytest.raises(InvalidContent):
            await store.append_reasoning(holder.message_id, {"content": "r", "extra": [nan]})
        with pytest.raises(InvalidContent):
            await store.update_chat(chat.chat_id, metadata={"x": nan})
        with pytest.raises(InvalidContent):
            await store.create_chat("u-content", "t-nan-chat", metadata={"x": [inf]})
        assert await store.find_chat("u-content", "t-nan-chat") is None
        assert (await store.get_message(holder.message_id)).metadata == {}
        assert (await store.get_chat(chat.chat_id)).metadata == {}
        (row,) = await self.raw_messages(store, chat.chat_id)
        assert row.body["tool_calls"] == []
        assert row.body["reasonings"] == []

    @pytest.mark.asyncio
    async def test_oversized_message_is_refused(self, store: Store) -> None:
        """16 MiB + 1 byte raises ``PayloadTooLarge`` and nothing is written (back door)."""
        chat = await store.create_chat("u-content", "t-too-big")
        too_big = "x" * (DEFAULT_MAX_MESSAGE_BYTES + 1)
        with pytest.raises(PayloadTooLarge):
            await store.append_message(chat.chat_id, Message(role="user", content=too_big))
        split = DEFAULT_MAX_MESSAGE_BYTES // 2
        spread = Message(
            role="assistant",
            content="x" * split,
            tool_calls=[ToolCall(arguments="y" * (split + 1))],
        )
        with pytest.raises(PayloadTooLarge):
            await store.append_message(chat.chat_id, spread)
        assert await self.raw_messages(store, chat.chat_id) == []
        assert (await store.list_messages(chat.chat_id)).items == []

    @pytest.mark.asyncio
    async def test_store_limit_option_is_enforced(self, store_factory: StoreFactory) -> None:
        """``max_message_bytes`` given to the store is the limit: at it passes, above it fails."""
        async with opened(store_factory, max_message_bytes=64) as store:
            chat = await store.create_chat("u-content", "t-limit")
            await store.append_message(chat.chat_id, Message(role="user", content="é" * 32))
            with pytest.raises(PayloadTooLarge):
                await store.append_message(
                    chat.chat_id, Message(role="user", content="é" * 32 + "x")
                )
            assert len(await self.raw_messages(store, chat.chat_id)) == 1

    @pytest.mark.asyncio
    @pytest.mark.parametrize("arguments", TOOL_ARGUMENTS, ids=range(len(TOOL_ARGUMENTS)))
    async def test_tool_call_arguments_byte_for_byte(self, store: Store, arguments: str) -> None:
        """Tool-call arguments are the model's exact string: never parsed or re-serialized."""
        chat = await store.create_chat("u-content", "t-args")
        inline = Message(role="assistant", tool_calls=[ToolCall(agui_id="a", arguments=arguments)])
        stored = await store.append_message(chat.chat_id, inline)
        appended = await store.append_tool_call(
            stored.message_id, ToolCall(agui_id="b", arguments=arguments)
        )
        assert appended.arguments.encode("utf-8") == arguments.encode("utf-8")
        by_id = await store.get_tool_call(appended.tool_call_id)
        by_agui = await store.get_tool_call_by_agui_id(chat.chat_id, "a")
        assert by_agui is not None
        for call in (by_id, by_agui, *(await store.get_message(stored.message_id)).tool_calls):
            assert call.arguments.encode("utf-8") == arguments.encode("utf-8")
        (row,) = await self.raw_messages(store, chat.chat_id)
        assert [c["arguments"] for c in row.body["tool_calls"]] == [arguments, arguments]

    @pytest.mark.asyncio
    async def test_user_subclass_fields_round_trip(self, store_factory: StoreFactory) -> None:
        """Fields a user adds to Message/ToolCall/Reasoning subclasses read back equal."""
        async with opened(store_factory, message_model=ContractMessage) as store:
            chat = await store.create_chat("u-content", "t-subclass")
            message = ContractMessage(
                role="assistant",
                agui_id="sub-1",
                priority=7,
                audit=AuditInfo(actor="bot", reasons=["a", "ü"]),
                tool_calls=[RichToolCall(agui_id="tc", name="f", arguments="{}", cost_usd=0.25)],
                reasonings=[RichReasoning(content="r", model_name="m-1")],
                undeclared_extra={"kept": True},
            )
            stored = await store.append_message(chat.chat_id, message)
            again = await store.append_message(chat.chat_id, message)
            await store.append_tool_call(
                stored.message_id, RichToolCall(agui_id="tc2", cost_usd=1.5)
            )
            read = await store.get_message(stored.message_id)
            (paged,) = (await store.list_messages(chat.chat_id)).items
        for got in (read, paged):
            assert isinstance(got, ContractMessage)
            assert (got.priority, got.audit) == (7, message.audit)
            assert [c.cost_usd for c in got.tool_calls] == [0.25, 1.5]
            assert got.reasonings[0].model_name == "m-1"
            assert got.model_extra == {"undeclared_extra": {"kept": True}}
        assert again.message_id == stored.message_id

    @pytest.mark.asyncio
    async def test_plain_message_retry_on_subclass_store(self, store_factory: StoreFactory) -> None:
        """A retry is idempotent when the store reads messages back as a user subclass."""
        async with opened(store_factory, message_model=ContractMessage) as store:
            chat = await store.create_chat("u-content", "t-subclass-retry")
            plain = Message(role="user", agui_id="plain-1", content="hi")
            first = await store.append_message(chat.chat_id, plain)
            again = await store.append_message(chat.chat_id, plain)
            assert again.message_id == first.message_id
            with pytest.raises(IdempotencyConflict):
                await store.append_message(chat.chat_id, plain.model_copy(update={"content": "x"}))

    @pytest.mark.asyncio
    async def test_append_returns_the_message_model_a_read_gives(
        self, store_factory: StoreFactory
    ) -> None:
        """An append returns its message as the store's ``message_model``, equal to a read.

        A plain ``Message`` appended to a store opened with a subclass reads back as that
        subclass with its defaults; the append's result is the same object a read gives,
        new or retried, single or batched (a driver may return a copy of the caller's object:
        the store rebuilds it).
        """
        async with opened(store_factory, message_model=ContractMessage) as store:
            chat = await store.create_chat("u-content", "t-subclass-result")
            plain = Message(role="user", agui_id="plain-r", content="hi")
            first = await store.append_message(chat.chat_id, plain)
            retried = await store.append_message(chat.chat_id, plain)
            batch = await store.append_messages(
                chat.chat_id, [Message(role="assistant", content="a"), {"role": "user"}]
            )
            paged = (await store.list_messages(chat.chat_id)).items
        assert [type(m) for m in (first, retried, *batch)] == [ContractMessage] * 4
        assert [first, *batch] == paged
        assert retried == paged[0]

    @pytest.mark.asyncio
    async def test_parts_and_fields_round_trip(self, store: Store) -> None:
        """Every part type and message field reads back equal; an empty message too."""
        message = Message(
            role="user",
            content="see attached",
            parts=[
                ImagePart(url="https://example.invalid/a.png", alt="a"),
                ImagePart(data="aGVsbG8=", mime_type="image/png"),
                FilePart(filename="r.pdf", size=12, mime_type="application/pdf"),
                ActionPart(name="approve", payload={"ok": [1, None, 2.5]}),
                ErrorPart(message="boom", code="E1"),
                CustomPart(name="geo", value={"lat": 1.25}),
            ],
            status="interrupted",
            in_progress=True,
            run_id="run-1",
            request_id="req-1",
            block_id="blk",
            step="llm",
            tokens=42,
            tool_call_ref="call-9",
        )
        await self._round_trip(store, message)
        await self._round_trip(store, Message(role="tool"))

    @pytest.mark.asyncio
    async def test_real_cjk_dialogues_round_trip(self, store: Store) -> None:
        """Chinese multi-turn dialogues (ACEBench) and their tool schemas read back exact."""
        dialogues = acebench_dialogues(limit=8)
        for index, (turns, tools_json) in enumerate(dialogues):
            chat = await store.create_chat("u-cjk", f"t-{index}")
            sent: list[Message] = [Message(role=role, content=text) for role, text in turns]
            sent.append(
                Message(
                    role="assistant", tool_calls=[ToolCall(name="schema", arguments=tools_json)]
                )
            )
            await store.append_messages(chat.chat_id, sent)
            walk = await walk_messages(store, chat.chat_id, limit=3)
            assert [body_of(m) for m in walk.items] == [body_of(m) for m in sent]
            rows = sorted(await self.raw_messages(store, chat.chat_id), key=lambda r: r.seq)
            assert [r.content for r in rows] == [m.content for m in sent]
            expected: Any = tools_json
            assert rows[-1].body["tool_calls"][0]["arguments"] == expected
