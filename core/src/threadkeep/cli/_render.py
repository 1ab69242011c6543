r"""How the command line shows messages, pages and chats with rich.

Stored text is always wrapped in ``rich.text.Text`` (never parsed as markup), so content
holding ``[brackets]`` prints as written, and passed through :func:`visible` first, so
terminal control sequences in it are shown escaped (``\x1b[31m``), never acted on.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from rich import box
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .._models import Chat, Message, MessageKind, Role
from .._paging import Page

__all__ = ["WIDE_CHATS", "chats_table", "message_panel", "page_caption", "visible"]

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0 controls but newline and tab, DEL, and C1 controls (ESC, CSI, bell, carriage return...)."""

_NAMED = {"\r": "\\r"}


def visible(text: str) -> str:
    r"""Return ``text`` with terminal control characters written out as escapes.

    Stored data may hold escape sequences (``\x1b[2J`` clears the screen) or a carriage
    return that overwrites a line; printed raw they would act on the terminal. Each C0
    control but newline and tab, DEL and each C1 control becomes ``\xNN`` (``\r`` for a
    carriage return).

    Args:
        text: Stored text (content, a name, an id...).

    Returns:
        The text, safe to print on a terminal.
    """
    return _CONTROL.sub(lambda m: _NAMED.get(m.group(), f"\\x{ord(m.group()):02x}"), text)


def _text(value: str, style: str = "") -> Text:
    return Text(visible(value), style=style)


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
        return title.append(f"boundary: {visible(message.boundary.reason)}", style="bold red")
    title.append(message.role.value, style=_ROLE_STYLES.get(message.role, ""))
    if message.run_id:
        title.append(f"  run {visible(message.run_id)}", style="dim")
    return title


def _message_lines(message: Message) -> list[RenderableType]:
    lines: list[RenderableType] = [
        _text(f"thinking: {reasoning.content}", style="italic dim")
        for reasoning in message.reasonings
    ]
    if message.role is Role.TOOL and message.tool_call_ref:
        lines.append(_text(f"result of {message.tool_call_ref}:", style="dim"))
    if message.content:
        lines.append(_text(message.content))
    lines.extend(_text(f"[{part.type} part]", style="dim") for part in message.parts)
    for call in message.tool_calls:
        line = Text("calls ", style="dim").append(visible(call.name), style="bold magenta")
        line.append("(").append(visible(call.arguments)).append(")")
        if call.agui_id:
            line.append(f"  id {visible(call.agui_id)}", style="dim")
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


WIDE_CHATS = 100
"""Console width from which ``chats`` may print a table; narrower consoles get two lines a chat."""

_FIXED_COLUMNS = 36 + 8 + 16
"""Widths of the chat id, status and time columns of the ``chats`` table."""

_GAPS = 4 * 3
"""Between the table's five columns: padding either side and a separator."""


def _table_widths(chats: list[Chat]) -> tuple[int, int, int]:
    """Return the user and thread column widths that keep every id whole, and the total."""
    user = max([6, *(len(visible(chat.user_id)) for chat in chats)])
    thread = max([10, *(len(visible(chat.thread_id)) for chat in chats)])
    return user, thread, _FIXED_COLUMNS + user + thread + _GAPS


def chats_table(chats: list[Chat], width: int = WIDE_CHATS) -> RenderableType:
    """Return chats for a console ``width`` characters wide: a table, or two lines a chat.

    Each chat shows its id (never wrapped: it is copied into other commands), status
    (``active``, ``archived``: read back from the archive on first read, or ``deleted``:
    hidden until ``threadkeep restore``), last message time (UTC to the minute; creation
    time when it has no message yet), user, name and thread key. The table is used from
    :data:`WIDE_CHATS` columns when every chat, user and thread id fits whole in it;
    otherwise the id, status, time and user make the first line and the name and thread
    the second (print these with ``soft_wrap=True`` so a long id is never folded by rich).

    Args:
        chats: The chats of one page, in page order.
        width: The console's width in characters.

    Returns:
        A rich renderable (a ``Table``, or a ``Group`` of lines).
    """
    user_width, thread_width, needed = _table_widths(chats)
    if width < max(WIDE_CHATS, needed):
        return Group(*(line for chat in chats for line in _chat_lines(chat)))
    table = Table(header_style="bold", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("chat_id", no_wrap=True, min_width=36)
    table.add_column("status", no_wrap=True, min_width=8)
    table.add_column("last (UTC)", no_wrap=True, min_width=16)
    table.add_column("user", overflow="fold", min_width=user_width, ratio=1)
    table.add_column("name / thread", overflow="fold", min_width=thread_width, ratio=3)
    for chat in chats:
        about = _name(chat).append("\n").append(visible(chat.thread_id), style="dim")
        table.add_row(
            Text(str(chat.chat_id)),
            _status(chat),
            Text(_when(chat.last_message_at or chat.created_at)),
            _text(chat.user_id),
            about,
        )
    return table


def _chat_lines(chat: Chat) -> tuple[Text, Text]:
    first = Text(str(chat.chat_id)).append("  ").append_text(_status(chat))
    first.append(f"  {_when(chat.last_message_at or chat.created_at)}  ", style="dim")
    first.append(visible(chat.user_id))
    second = Text("    ").append_text(_name(chat))
    second.append(f"  thread {visible(chat.thread_id)}", style="dim")
    return first, second


def _status(chat: Chat) -> Text:
    status = "deleted" if chat.deleted_at is not None else chat.status.value
    return Text(status, style=_STATUS_STYLES.get(status, ""))


def _name(chat: Chat) -> Text:
    return _text(chat.name) if chat.name else Text("(no name)", style="dim")


_STATUS_STYLES = {"active": "green", "archived": "cyan", "deleted": "red"}


def _when(value: datetime | None) -> str:
    return "" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
