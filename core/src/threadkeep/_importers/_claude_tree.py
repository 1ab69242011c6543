"""The line tree of a Claude Code session file, cut into chats (the active path and branches).

Every line of a session carries ``uuid`` and ``parentUuid``; together they form a tree
(``logicalParentUuid`` joins a compaction boundary, whose ``parentUuid`` is ``null``, to
the last line before it). An edit of a prompt or a retry of an answer adds a sibling
beside the old line; Claude Code continues (and ``--resume`` resumes) from the newest line,
so the rule here is the same:

1. The chat is the path from the root to the line written last (the last in the file),
   walking up through lines that are not messages (``progress`` lines sit in the chain).
2. Parallel tool calls also make siblings (each ``tool_use`` block and its result hang off
   the previous block's line), and they are not forks: a line holding another block of
   an API message on the path (same ``message.id``), or only ``tool_result`` blocks
   answering calls on the path, joins the path.
3. What is left is never dropped: the same rule, applied again to the lines left, gives a
   branch chat per abandoned path (newest first), each holding the lines from its fork
   point on and naming the line it forked after.

Messages of a chat keep the order of their lines in the file (the order they were written).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Branch", "Line", "split_branches"]


@dataclass(slots=True)
class Line:
    """One message-bearing line: its number, ids and the parsed object."""

    number: int
    uuid: str
    parent: str | None
    data: dict[str, Any]
    message_id: str | None = None
    call_ids: tuple[str, ...] = ()
    answers: tuple[str, ...] | None = None
    """``tool_use_id`` of every block when the line holds only ``tool_result`` blocks."""


@dataclass(slots=True)
class Branch:
    """The lines of one chat, in file order, and the line the branch forked after."""

    lines: list[Line]
    fork_after: str | None = None
    members: set[str] = field(default_factory=set)


def split_branches(lines: list[Line], parents: dict[str, str | None]) -> list[Branch]:
    """Cut a session's message lines into the active chat and its abandoned branches.

    Args:
        lines: Every message-bearing line, in file order.
        parents: The parent of every line with a ``uuid`` (message lines and the others,
            such as ``progress`` lines, which may sit in a chain).

    Returns:
        The active chat first, then one branch per abandoned path (the newest first);
        together they hold every line exactly once.
    """
    remaining = {line.uuid: line for line in lines}
    owner: dict[str, int] = {}
    branches: list[Branch] = []
    while remaining:
        leaf = max(remaining.values(), key=lambda line: line.number)
        members, fork_after = _path(leaf.uuid, remaining, parents, owner)
        _adopt(members, remaining)
        chosen = sorted((remaining[uuid] for uuid in members), key=lambda line: line.number)
        for uuid in members:
            del remaining[uuid]
            owner[uuid] = len(branches)
        branches.append(Branch(chosen, fork_after, members))
    return branches


def _path(
    leaf: str,
    remaining: dict[str, Line],
    parents: dict[str, str | None],
    owner: dict[str, int],
) -> tuple[set[str], str | None]:
    """Walk up from ``leaf``; stop at a line of an earlier chat (the fork point) or a root."""
    members: set[str] = set()
    seen: set[str] = set()
    current: str | None = leaf
    while current is not None and current not in seen:
        seen.add(current)
        if current in owner:
            return members, current
        if current in remaining:
            members.add(current)
        current = parents.get(current)
    return members, None


def _adopt(members: set[str], remaining: dict[str, Line]) -> None:
    """Add the lines left that are parallel siblings of the path (rule 2), to a fixpoint."""
    while True:
        on_path = [remaining[uuid] for uuid in members]
        message_ids = {line.message_id for line in on_path if line.message_id}
        calls = {call for line in on_path for call in line.call_ids}
        answered = {answer for line in on_path for answer in line.answers or ()}
        added = [
            line
            for line in remaining.values()
            if line.uuid not in members and _sibling(line, message_ids, calls, answered)
        ]
        if not added:
            return
        members.update(line.uuid for line in added)


def _sibling(line: Line, message_ids: set[str], calls: set[str], answered: set[str]) -> bool:
    if line.message_id is not None and line.message_id in message_ids:
        return True
    if line.answers:
        return all(a in calls for a in line.answers) and not answered & set(line.answers)
    return False
