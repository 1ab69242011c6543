"""``threadkeep demo``: store a scripted agent conversation, then read it back page by page.

The script has user and assistant turns across three runs, two tool calls each answered by a
``tool`` message linked through ``tool_call_ref``, and a reasoning step. Every message has a
fixed ``agui_id``, so running the demo again stores nothing new (an
append with a stored ``agui_id`` returns the stored message).
"""

from __future__ import annotations

import shlex
from typing import Annotated

import typer
from rich.rule import Rule
from rich.text import Text

from .._models import Chat, Message, Reasoning, Role, ToolCall
from .._registry import mask_url
from .._store import Store
from ._app import UrlOption, opened_store, resolve_url, run, stdout_console
from ._render import message_panel, page_caption

__all__ = ["DEMO_THREAD_ID", "DEMO_USER_ID", "demo_messages", "register"]

DEMO_USER_ID = "demo-user"
DEMO_THREAD_ID = "threadkeep-demo"


def demo_messages() -> list[Message]:
    """Return the scripted conversation (11 messages, fixed ``agui_id``s), oldest first."""
    forecast = ToolCall(
        agui_id="call_forecast_1",
        name="get_forecast",
        arguments='{"city": "Lisbon", "day": "friday"}',
    )
    packing = ToolCall(
        agui_id="call_packing_1",
        name="add_to_list",
        arguments='{"list": "packing", "item": "umbrella"}',
    )
    thinking = Reasoning(
        agui_id="reasoning_1",
        content="Rain depends on the forecast; check it instead of guessing.",
    )
    script: list[tuple[str, Role, str, str | None, dict[str, object]]] = [
        ("demo-1", Role.SYSTEM, "You are a concise travel assistant.", None, {}),
        ("demo-2", Role.USER, "I fly to Lisbon on Friday. Do I need an umbrella?", "run-1", {}),
        (
            "demo-3",
            Role.ASSISTANT,
            "Let me check the forecast.",
            "run-1",
            {"tool_calls": [forecast], "reasonings": [thinking]},
        ),
        (
            "demo-4",
            Role.TOOL,
            '{"city": "Lisbon", "rain_probability": 0.7, "high_c": 19}',
            "run-1",
            {"tool_call_ref": "call_forecast_1"},
        ),
        ("demo-5", Role.ASSISTANT, "Yes: 70% chance of rain, high of 19 °C.", "run-1", {}),
        ("demo-6", Role.USER, "Thanks! Put it on my packing list.", "run-2", {}),
        ("demo-7", Role.ASSISTANT, "Adding it now.", "run-2", {"tool_calls": [packing]}),
        (
            "demo-8",
            Role.TOOL,
            '{"ok": true, "items": 3}',
            "run-2",
            {"tool_call_ref": "call_packing_1"},
        ),
        ("demo-9", Role.ASSISTANT, "Done: your packing list has 3 items now.", "run-2", {}),
        ("demo-10", Role.USER, "Perfect, that's all.", "run-3", {}),
        ("demo-11", Role.ASSISTANT, "Have a great trip! ☂", "run-3", {}),
    ]
    return [
        Message.model_validate(
            {"agui_id": agui_id, "role": role, "content": content, "run_id": run_id, **more}
        )
        for agui_id, role, content, run_id, more in script
    ]


async def _store_demo(store: Store) -> tuple[Chat, int]:
    """Store the script; return the chat and how many messages were new."""
    chat = await store.create_chat(DEMO_USER_ID, DEMO_THREAD_ID, name="threadkeep demo")
    sent = demo_messages()
    stored = await store.append_messages(chat.chat_id, sent)
    # The store keeps the client's message_id; a message from an earlier run has another.
    created = sum(kept.message_id == new.message_id for new, kept in zip(sent, stored, strict=True))
    return chat, created


async def _demo(url: str | None, page_size: int) -> None:
    console = stdout_console()
    async with opened_store(url) as store:
        chat, created = await _store_demo(store)
        total = len(demo_messages())
        console.print(
            Text.assemble(
                ("threadkeep demo", "bold"),
                f"  store {store.url}\n",
                f"chat {chat.chat_id}: {created} messages stored now, "
                f"{total - created} already there from an earlier run\n",
                (
                    f"Reading it back {page_size} per page: the first page is the newest, "
                    "next_cursor walks to older ones, each page runs oldest first.",
                    "dim",
                ),
            ),
            soft_wrap=True,  # long lines (URLs, ids) stay whole for copying and grepping
        )
        cursor: str | None = None
        number = 0
        while True:
            number += 1
            page = await store.list_messages(chat.chat_id, limit=page_size, cursor=cursor)
            console.print(Rule(page_caption(page, number), align="left"))
            for message in page.items:
                console.print(message_panel(message))
            if not page.has_more:
                break
            cursor = page.next_cursor
        console.print(next_hint(chat, url, page_size), soft_wrap=True)


def next_hint(chat: Chat, url: str | None, page_size: int) -> Text:
    """Return the demo's last line: the ``history`` command that reads the chat again.

    Args:
        chat: The demo chat.
        url: The ``--url`` given, or ``None`` (then the resolved URL is used).
        page_size: The ``--page-size`` used; the command repeats it as ``--limit``.

    Returns:
        ``Next: threadkeep history ID --url URL --limit N`` (shell-quoted, a password shown
        as ``***``), or, for an in-process ``memory://`` store, a line saying the chat is gone.

    Raises:
        InvalidArgument: If the settings (for the resolved URL) are invalid.
    """
    store_url = resolve_url(url)
    if store_url.partition("://")[0].lower() == "memory":
        return Text(
            f"The {store_url} store lived in this process only: the chat is gone now. Give "
            "--url a database (for example sqlite+aiosqlite:///./demo.db) to read it again "
            "with threadkeep history.",
            style="dim",
        )
    shown = mask_url(store_url)
    words = ["threadkeep", "history", str(chat.chat_id), "--url", shown]
    line = f"Next: {shlex.join([*words, '--limit', str(page_size)])}"
    if shown != store_url:
        line += "  (password hidden: put it back in place of ***)"
    return Text(line, style="dim")


def demo(
    url: UrlOption = None,
    page_size: Annotated[
        int, typer.Option("--page-size", min=1, max=200, help="Messages per page.")
    ] = 4,
) -> None:
    """Store a scripted agent conversation (tool calls, a reasoning step) and page it back.

    Running it again adds nothing: every message has a fixed agui_id.
    """
    run(_demo(url, page_size))


def register(app: typer.Typer) -> None:
    """Add ``demo`` to ``app``."""
    app.command("demo")(demo)
