"""Shared state, helpers and strategies of the state machine's rule mixins."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from hypothesis import event, note
from hypothesis import strategies as st

from threadkeep import Message, Store, ToolCall

from ._helpers import body_of
from ._model import ModelChat, ModelMessage, StoreModel

if TYPE_CHECKING:
    from threadkeep import Capabilities

__all__ = ["MachineBase", "texts"]

T = TypeVar("T")

texts = st.one_of(
    st.text(max_size=24),
    st.sampled_from(["", "\x00", "a\x00b", "😀👨‍👩‍👧", "中文字符 𠜎", "e\u0301", "\u2028\ufeff"]),
)
"""Content the machine writes: any non-surrogate text, with NUL, emoji and CJK favoured."""

ROLES = ("user", "assistant", "system", "developer", "tool", "reasoning")
RUN_IDS = (None, "run-1", "run-2")


class MachineBase:
    """What the rule mixins share; ``StoreStateMachine`` provides the attributes."""

    if TYPE_CHECKING:
        store: Store
        model: StoreModel
        namespace: str
        touched: set[UUID]
        chats_changed: bool
        counter: int
        capabilities: Capabilities

        def run(self, coroutine: Coroutine[Any, Any, T]) -> T: ...

        def lookup(
            self,
            call: Coroutine[Any, Any, T],
            kind: str = "message",
            item_id: UUID | None = None,
        ) -> T | None: ...

    def begin(self, rule_name: str) -> None:
        """Start a rule: only what it touches is checked by the invariants afterwards.

        The rule's name is recorded as a Hypothesis event, so
        ``--hypothesis-show-statistics`` shows how often each rule ran.
        """
        event(f"rule {rule_name}")
        self.touched = set()

    def fresh_id(self, prefix: str) -> str:
        """Return a client id never used before in this run."""
        self.counter += 1
        return f"{prefix}{self.counter}"

    def expect_error(
        self,
        error: type[Exception] | tuple[type[Exception], ...],
        call: Coroutine[Any, Any, Any],
    ) -> None:
        """Run a store call that must raise ``error`` (one of them, for a tuple)."""
        try:
            result = self.run(call)
        except error as exc:
            note(f"  -> {type(exc).__name__} as expected")
            event(f"expected {type(exc).__name__}")
            return
        msg = f"expected {error}, the store returned {result!r}"
        raise AssertionError(msg)

    def user(self, index: int) -> str:
        """The machine's ``index``-th user id (namespaced to this run)."""
        return f"{self.namespace}-u{index}"

    def tenant(self, index: int) -> str | None:
        """The machine's tenant ids (namespaced), or ``None``."""
        return None if index == 2 else f"{self.namespace}-tenant{index}"

    def pick_chat(self, data: st.DataObject) -> ModelChat:
        """Draw one of the run's chats: usually a live one, sometimes a deleted one."""
        chats = sorted(self.model.chats.values(), key=lambda c: c.order)
        live = [c for c in chats if not c.deleted]
        if live and data.draw(st.integers(0, 4), label="live chat?") > 0:
            chats = live
        return data.draw(st.sampled_from(chats), label="chat")

    def all_messages(self) -> list[tuple[ModelChat, ModelMessage]]:
        """Every message of the run, hidden ones and those of deleted chats included."""
        return [
            (c, m)
            for c in sorted(self.model.chats.values(), key=lambda c: c.order)
            for m in c.messages
        ]

    def has_messages(self) -> bool:
        """Whether any chat holds a message."""
        return any(c.messages for c in self.model.chats.values())

    def draw_message(self, data: st.DataObject, chat: ModelChat) -> Message:
        """Draw a message for ``chat``: new, an equal retry, or a changed retry."""
        retryable = [m for m in chat.messages if m.agui_id is not None]
        kind = data.draw(st.sampled_from(["new", "new", "new", "retry", "changed"]), label="kind")
        if kind != "new" and retryable:
            stored = data.draw(st.sampled_from(retryable), label="retry of")
            body = dict(stored.body)
            if kind == "changed":
                body["content"] = f"{body.get('content', '')}~"
            return Message.model_validate(body)
        calls = [
            ToolCall(
                agui_id=self.fresh_id("call"),
                name="tool",
                arguments=data.draw(texts, label="arguments"),
            )
            for _ in range(data.draw(st.integers(0, 2), label="tool calls"))
        ]
        refs = sorted(
            {
                c["agui_id"]
                for m in chat.messages
                for c in m.nested("tool_calls")
                if c.get("agui_id")
            }
        )
        role = data.draw(st.sampled_from(ROLES), label="role")
        ref = (
            data.draw(st.sampled_from([*refs, "call-unknown"]), label="ref")
            if role == "tool"
            else None
        )
        agui = data.draw(st.sampled_from(["fresh", "none", "empty"]), label="agui")
        return Message(
            role=role,
            content=data.draw(texts, label="content"),
            agui_id={"fresh": self.fresh_id("msg"), "none": None, "empty": ""}[agui],
            tool_calls=calls,
            tool_call_ref=ref,
            run_id=data.draw(st.sampled_from(RUN_IDS), label="run_id"),
            metadata=data.draw(
                st.dictionaries(st.sampled_from(["k", "\x00", "中"]), texts, max_size=2)
            ),
        )

    def describe(self, message: Message) -> str:
        """A short readable description of a message for ``note()``."""
        return f"{message.role}(agui={message.agui_id!r}, content={message.content[:16]!r})"

    def check_body(self, label: str, got: Message, want: dict[str, Any]) -> None:
        """Assert a message read back has exactly the body the model holds."""
        assert body_of(got) == want, f"{label}: body differs from what was written"
