"""How the command line shows messages, pages and chats with rich.

Stored text is always wrapped in ``rich.text.Text`` (never parsed as markup), so content
holding ``[brackets]`` prints as written.
"""

from __future__ import annotations

from datetime import datetime

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .._models import Chat, Message, MessageKind, Role
from .._paging import Page

__all__ = ["chats_table", "message_panel", "page_caption"]

_ROLE_STYLES = {
    Role.USER: "bold cyan",
    Role.ASSISTANT: "bold green",
    Role.TOOL: "bold magenta",
    Role.SYSTEM: "bold yellow",
    Role.DEVELOPER: "bold yellow",
    Role.REASONING: "italic dim",
}


def message_panel(message: Message) -> Panel:
    """Return one message as a panel.

    The title holds seq, role and run; the body the reasoning, the call a tool result
    answers, the content, typed parts and tool calls.
    """
    return Panel(
        Group(*_message_lines(message)),
        title=_message_title(message),
        title_align="left",
        border_style=_ROLE_STYLES.get(message.role, "white").replace("bold ", ""),
    )


def _message_title(message: Message) -> Text:
    title = Text(f"#{message.seq} ", style="dim")
    if message.kind is MessageKind.BOUNDARY and message.boundary is not None:
        return title.append(f"boundary: {message.boundary.reason}", style="bold red")
    title.append(message.role.value, style=_ROLE_STYLES.get(message.role, ""))
    if message.run_id:
        title.append(f"  run {message.run_id}", style="dim")
    return title


def _message_lines(message: Message) -> list[RenderableType]:
    lines: list[RenderableType] = [
        Text(f"thinking: {reasoning.content}", style="italic dim")
        for reasoning in message.reasonings
    ]
    if message.role is Role.TOOL and message.tool_call_ref:
        lines.append(Text(f"result of {message.tool_call_ref}:", style="dim"))
    if message.content:
        lines.append(Text(message.content))
    lines.extend(Text(f"[{part.type} part]", style="dim") for part in message.parts)
    for call in message.tool_calls:
        line = Text("calls ", style="dim").append(call.name, style="bold magenta")
        line.append("(").append(call.arguments).append(")")
        if call.agui_id:
            line.append(f"  id {call.agui_id}", style="dim")
        lines.append(line)
    return lines or [Text("(empty)", style="dim")]


def page_caption(page: Page[Message], number: int) -> Text:
    """Return the caption of the ``number``-th page of a walk (1 = newest)."""
    if not page.items:
        return Text(f"page {number}: no messages", style="bold")
    first, last = page.items[0].seq, page.items[-1].seq
    caption = Text(f"page {number}", style="bold")
    caption.append(f"  messages #{first}..#{last}, oldest first", style="dim")
    caption.append("  more: older pages" if page.has_more else "  (oldest page)", style="dim")
    return caption


def chats_table(chats: list[Chat]) -> Table:
    """Return a table of chats: id, user, thread, name, message time, creation time."""
    table = Table(show_lines=False, header_style="bold")
    for column in ("chat_id", "user", "thread", "name", "last message", "created"):
        table.add_column(column, overflow="fold")
    for chat in chats:
        table.add_row(
            Text(str(chat.chat_id)),
            Text(chat.user_id),
            Text(chat.thread_id),
            Text(chat.name or ""),
            Text(_when(chat.last_message_at)),
            Text(_when(chat.created_at)),
        )
    return table


def _when(value: datetime | None) -> str:
    return "" if value is None else value.isoformat(timespec="seconds")
