"""Claude Code session files become chats (``threadkeep import PATH --format claude-code``).

``PATH`` is a session file (``~/.claude/projects/<project>/<session>.jsonl``), a project
folder (every ``*.jsonl`` in it), or the folder of projects (every project in it). A
session's subagents are read with it: ``<session>/subagents/agent-*.jsonl`` beside the file,
and (older layout) ``agent-*.jsonl`` files in the project folder whose ``sessionId`` is the
session's. Files are streamed line by line (lines of hundreds of kilobytes are normal).

Chats and keys (deterministic, so importing again changes nothing):

- the session's active path is the chat ``claude-code:<session>`` (``<session>`` is the file
  name without ``.jsonl``); each abandoned branch (an edited prompt, a retried answer) is the
  chat ``claude-code:<session>#branch-<uuid of its first line>``, holding the lines after its
  fork point, with ``metadata["claude_code"]["fork_after"]`` naming the line it forked after
  (see :mod:`threadkeep._importers._claude_tree` for the rule);
- a subagent is the chat ``claude-code:<session>/agent-<agentId>`` (sidechain lines inside
  the session file, as older versions wrote them, too: per ``agentId``, else per sidechain
  tree, ``agent-sidechain-<uuid of its root>``); its metadata names the
  parent chat and the ``Task`` tool call that started it, and that call carries
  ``subagent_thread_id`` (the link is the result's ``toolUseResult.agentId``, else a
  ``progress`` line's ``parentToolUseID``, else the call whose ``prompt`` is the subagent's
  first prompt);
- message ids are the line ``uuid`` (user and system lines), the API ``message.id``
  (assistant messages, whose lines fold into one) and ``<uuid>#<block>`` (tool results).

``progress``, ``file-history-snapshot`` and other bookkeeping lines are counted, per type,
in the chat's ``metadata["claude_code"]["skipped_lines"]`` and skipped; ``summary`` lines
name the chat. The mapping of every block is in ``docs/importers.md``.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import InvalidArgument
from .._models import Message
from . import ImportReport, ProgressCallback
from ._claude_messages import chat_messages, trim_result
from ._claude_tree import Line, split_branches
from ._files import check_record
from ._jsonl import iter_json_lines
from ._native import Conversation, check_conversations, check_message, store_conversations
from ._shape import shape_checked

if TYPE_CHECKING:
    from .._store import Store

__all__ = ["import_claude_code", "session_files"]

_log = logging.getLogger("threadkeep.import")
_MESSAGE_TYPES = frozenset({"user", "assistant", "system"})
_AGENT_PREFIX = "agent-"


@dataclass
class _Session:
    """What one file holds once read: message lines, the tree, and what was skipped."""

    path: Path
    label: str
    lines: list[Line] = field(default_factory=list)
    parents: dict[str, str | None] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)
    info: dict[str, Any] = field(default_factory=dict)
    titles: dict[str, str] = field(default_factory=dict)
    agent_calls: dict[str, str] = field(default_factory=dict)
    subagents: list[_Session] = field(default_factory=list)
    seen: dict[str, Line] = field(default_factory=dict)
    inline: dict[str, _Session] | None = None
    """Sidechain lines inside a session file (older versions), by ``agentId``; ``None`` in
    a subagent file, whose lines are all its own."""


async def import_claude_code(
    store: Store,
    path: str | PathLike[str],
    *,
    user_id: str,
    progress: ProgressCallback | None = None,
) -> ImportReport:
    """Import Claude Code sessions (a file, a project folder or a folder of projects).

    Every line of every file is read, checked and converted before anything is written,
    so a malformed line anywhere writes nothing. The files are read twice, so that memory
    holds one session (with its subagents) at a time, not the folder: the first pass
    converts and checks each session and keeps only an outline (:class:`_Outlined`); the
    second reads each session again and writes its chats. A file changed between the two
    passes stops the import there ("changed during the import"): the sessions written
    before stay, each chat whole, and a re-run imports the rest. See the module docstring
    for the chats and keys, and ``docs/importers.md`` for the mapping.

    Args:
        store: An open store.
        path: A session ``.jsonl`` file, a project folder, or a folder of project folders.
        user_id: Owner of the imported chats.
        progress: Called as ``progress(0, chats)`` once everything is checked, then as
            ``progress(done, chats)`` after each chat is written.

    Returns:
        Counts of chats, messages and tool calls, created versus already present.

    Raises:
        InvalidArgument: If a file is missing, unreadable, not JSON Lines, or a line does
            not have the shape of its type (the message names the file, line and field),
            or nothing to import is found. Nothing is written then.
        InvalidContent / PayloadTooLarge: If a line holds what no store can keep.
        IdempotencyConflict: If a chat was imported before with other content.
        ThreadkeepError: Any error of the store; chats before the failing one stay.
    """
    root = Path(path)
    source = root.name
    outline: list[_Outlined] = []
    first_with: dict[str, str] = {}
    for file in session_files(root):  # pass 1: every line checked, one session held at a time
        session, conversations = _convert(file, store.max_message_bytes)
        check_conversations(store, user_id, conversations, source, first_with=first_with)
        if session.skipped:
            _log.info("%s: skipped lines by type: %s", session.label, dict(session.skipped))
        threads = tuple(c.thread_id for c in conversations)
        outline.append(_Outlined(file, _stamps(session), threads))
    total = sum(len(o.threads) for o in outline)
    if progress is not None:
        progress(0, total)
    report = ImportReport()
    done = 0
    for entry in outline:  # pass 2: each session read again and written, a chat at a time
        session, conversations = _convert(entry.path, store.max_message_bytes)
        threads = tuple(c.thread_id for c in conversations)
        if _stamps(session) != entry.stamps or threads != entry.threads:
            msg = f"{entry.path} changed during the import; import it again"
            raise InvalidArgument(msg)
        report.merge(
            await store_conversations(store, user_id, conversations, _offset(progress, done, total))
        )
        done += len(conversations)
    return report


@dataclass(frozen=True, slots=True)
class _Outlined:
    """A session as the first pass leaves it: what the second pass checks it against.

    The tree of a session's lines (``uuid``/``parentUuid``) and the links of its subagents
    to its ``Task`` calls stay within the session and the subagent files read with it, so
    the second pass rebuilds them from those files; the outline keeps only which files
    were read (with their size and modification time) and the chats they gave.

    Attributes:
        path: The session file.
        stamps: ``(path, size, mtime_ns)`` of the file and of each subagent file read with it.
        threads: The thread ids of its chats, in order.
    """

    path: Path
    stamps: tuple[tuple[str, int, int], ...]
    threads: tuple[str, ...]


def _convert(file: Path, max_bytes: int) -> tuple[_Session, list[Conversation]]:
    """Read one session file (and its subagents) and convert it, every line checked."""
    with shape_checked(file.name):
        session = _read_with_subagents(file)
    with shape_checked(session.label):
        return session, _session_conversations(session, max_bytes)


def _stamps(session: _Session) -> tuple[tuple[str, int, int], ...]:
    """The size and modification time of every file a session was read from."""
    paths = sorted({str(session.path), *(str(sub.path) for sub in session.subagents)})
    stamps = []
    for name in paths:
        try:
            info = Path(name).stat()
        except OSError:
            stamps.append((name, -1, -1))
        else:
            stamps.append((name, info.st_size, info.st_mtime_ns))
    return tuple(stamps)


def _offset(progress: ProgressCallback | None, done: int, total: int) -> ProgressCallback | None:
    """``progress`` as :func:`store_conversations` calls it for one session of the import."""
    if progress is None:
        return None

    def report(written: int, _: int) -> None:
        if written:
            progress(done + written, total)

    return report


def session_files(root: Path) -> list[Path]:
    """Return the session files under ``root`` (see the module docstring), sorted.

    Raises:
        InvalidArgument: If ``root`` does not exist or holds no ``.jsonl`` file.
    """
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise InvalidArgument(f"{root}: no such file or directory")
    files = _top_level(root)
    if not files:
        files = [
            f for sub in sorted(p for p in root.iterdir() if p.is_dir()) for f in _top_level(sub)
        ]
    if not files:
        raise InvalidArgument(f"{root} holds no Claude Code session file (*.jsonl)")
    return files


def _top_level(folder: Path) -> list[Path]:
    """Session files of a project folder: ``*.jsonl`` except old-layout subagent files."""
    found = sorted(p for p in folder.glob("*.jsonl") if p.is_file())
    sessions = [p for p in found if not p.name.startswith(_AGENT_PREFIX)]
    return sessions or found


def _read_with_subagents(path: Path) -> _Session:
    if path.name.startswith(_AGENT_PREFIX):
        return _read(path, path.name)  # a subagent file named directly: a chat of its own
    session = _read(path, path.name, inline=True)
    session.subagents += _inline_agents(session)
    folder = path.parent / path.stem / "subagents"
    nested = sorted(folder.glob(f"{_AGENT_PREFIX}*.jsonl")) if folder.is_dir() else []
    for file in nested:
        session.subagents.append(_read(file, f"{path.stem}/subagents/{file.name}"))
    ids = {session.info.get("sessionId"), path.stem}  # the same in a file Claude Code wrote
    for file in sorted(path.parent.glob(f"{_AGENT_PREFIX}*.jsonl")):
        if _session_id(file) in ids:
            session.subagents.append(_read(file, file.name))
    return session


def _inline_agents(session: _Session) -> list[_Session]:
    """Sessions of the sidechain lines of a session file: one per ``agentId``, else per tree."""
    agents: list[_Session] = []
    for key, sidechain in sorted((session.inline or {}).items()):
        if key:
            agents.append(sidechain)
            continue
        trees: dict[str, _Session] = {}
        members = {line.uuid for line in sidechain.lines}
        for line in sidechain.lines:
            root = _root(line.uuid, session.parents, members)
            tree = trees.setdefault(root, _Session(session.path, session.label))
            tree.parents, tree.info = (
                session.parents,
                {**sidechain.info, "agentId": f"sidechain-{root}"},
            )
            tree.lines.append(line)
        agents += trees.values()
    return agents


def _root(uuid: str, parents: dict[str, str | None], members: set[str]) -> str:
    """The topmost sidechain line above ``uuid`` (the walk stops at the session's lines)."""
    seen = {uuid}
    while (parent := parents.get(uuid)) in members and parent not in seen:
        seen.add(parent)
        uuid = parent
    return uuid


def _session_id(path: Path) -> str | None:
    """The ``sessionId`` of a file's first line that has one (read no further)."""
    for _, value in iter_json_lines(path):
        if isinstance(value, dict) and isinstance(value.get("sessionId"), str):
            return str(value["sessionId"])
    return None


def _read(path: Path, label: str, *, inline: bool = False) -> _Session:
    session = _Session(path, label, inline={} if inline else None)
    typed = 0
    try:
        for number, value in iter_json_lines(path):
            where = f"{label}: line {number}"
            if not isinstance(value, dict):
                raise InvalidArgument(f"{where} is a {type(value).__name__}, not a JSON object")
            check_record(value, where)
            typed += _is_claude_line(value)
            _take(session, number, value, where)
    except InvalidArgument as exc:
        if typed:
            raise
        raise InvalidArgument(f"{exc}{_OTHER_FORMAT}") from exc
    if not typed and (session.lines or session.skipped):
        raise InvalidArgument(f"{label} holds no Claude Code line{_OTHER_FORMAT}")
    return session


_OTHER_FORMAT = "; is it a Claude Code session (JSON Lines)? --format auto tells formats apart"


def _is_claude_line(value: dict[str, Any]) -> bool:
    """Whether a line has Claude Code's shape: a ``type`` with a ``uuid`` or ``sessionId``."""
    if value.get("type") in {"summary", "file-history-snapshot"}:
        return True
    return isinstance(value.get("type"), str) and ("uuid" in value or "sessionId" in value)


def _take(session: _Session, number: int, value: dict[str, Any], where: str) -> None:
    kind = value.get("type")
    uuid = value.get("uuid")
    parent = value.get("parentUuid") or value.get("logicalParentUuid")
    if isinstance(uuid, str) and uuid:
        session.parents.setdefault(uuid, parent if isinstance(parent, str) else None)
    target = session
    if session.inline is not None and value.get("isSidechain") is True and kind in _MESSAGE_TYPES:
        agent = value.get("agentId")
        key = agent if isinstance(agent, str) and agent else ""
        target = session.inline.setdefault(key, _Session(session.path, session.label))
        target.parents = session.parents  # one tree: a sidechain hangs off the session
    for key in ("sessionId", "cwd", "version", "gitBranch", "agentId"):
        if key not in target.info and isinstance(value.get(key), str):
            target.info[key] = value[key]
    if kind in _MESSAGE_TYPES:
        _note_agent(session, value)
        line = _line(number, trim_result(value), where)
        if _unique(session, line):
            target.lines.append(line)
        return
    session.skipped[str(kind)] += 1
    if kind == "summary" and isinstance(value.get("leafUuid"), str):
        session.titles[value["leafUuid"]] = str(value.get("summary", ""))
    elif kind == "progress":
        data = value.get("data")
        agent = data.get("agentId") if isinstance(data, dict) else None
        call = value.get("parentToolUseID")
        if isinstance(agent, str) and isinstance(call, str):
            session.agent_calls.setdefault(agent, call)


def _unique(session: _Session, line: Line) -> bool:
    """Whether to keep ``line``: a repeated ``uuid`` is a copy (skipped, counted) or kept apart.

    Claude Code has been seen writing a line twice (after a resume); a copy is counted in
    ``skipped_lines["duplicate"]``. A different line under a ``uuid`` already read keeps
    ``<uuid>@line<N>`` as its id, so neither is lost.
    """
    earlier = session.seen.get(line.uuid)
    if earlier is not None:
        if earlier.data == line.data:
            session.skipped["duplicate"] += 1
            return False
        line.uuid = f"{line.uuid}@line{line.number}"
        session.parents[line.uuid] = line.parent
    session.seen[line.uuid] = line
    return True


def _line(number: int, value: dict[str, Any], where: str) -> Line:
    uuid = value.get("uuid")
    if not isinstance(uuid, str) or not uuid:
        uuid = f"line:{number}"  # deterministic for a line without one
    parent = value.get("parentUuid") or value.get("logicalParentUuid")
    message = value.get("message")
    if value["type"] != "system" and not isinstance(message, dict):
        raise InvalidArgument(f"{where}: a {value['type']} line needs a 'message' object")
    content = message.get("content") if isinstance(message, dict) else None
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    message_id = message.get("id") if isinstance(message, dict) else None
    results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
    only_results = bool(results) and len(results) == len(content or [])
    return Line(
        number=number,
        uuid=uuid,
        parent=parent if isinstance(parent, str) else None,
        data=value,
        message_id=message_id
        if value["type"] == "assistant" and isinstance(message_id, str)
        else None,
        call_ids=tuple(
            b["id"] for b in blocks if b.get("type") == "tool_use" and isinstance(b.get("id"), str)
        ),
        answers=tuple(str(r) for r in results) if only_results else None,
    )


def _note_agent(session: _Session, value: dict[str, Any]) -> None:
    """Remember which tool call a subagent answered (``toolUseResult.agentId``)."""
    result = value.get("toolUseResult")
    agent = result.get("agentId") if isinstance(result, dict) else None
    content = value.get("message", {}).get("content")
    if not isinstance(agent, str) or not isinstance(content, list):
        return
    for block in content:
        if isinstance(block, dict) and isinstance(block.get("tool_use_id"), str):
            session.agent_calls.setdefault(agent, block["tool_use_id"])
            return


def _session_conversations(session: _Session, max_bytes: int) -> list[Conversation]:
    thread_id = f"claude-code:{session.path.stem}"
    own = _chats(session, thread_id, max_bytes)
    # A subagent may answer a call of the main chat or of a branch (a retried Task).
    calls = {c.agui_id: c for chat in own for m in chat.messages for c in m.tool_calls}
    linked: list[Conversation] = []
    for sub in session.subagents:
        agent = sub.info.get("agentId") or sub.path.stem.removeprefix(_AGENT_PREFIX)
        sub_thread = f"claude-code:{session.path.stem}/agent-{agent}"
        chats = _chats(sub, sub_thread, max_bytes)
        call_id = session.agent_calls.get(agent) or _by_prompt(chats, calls)
        for chat in chats:
            chat.metadata["claude_code"] |= {
                "agentId": agent,
                "parent_thread_id": thread_id,
                "parent_tool_call_id": call_id,
            }
        call = calls.get(call_id) if call_id else None
        if call is not None:
            setattr(call, "subagent_thread_id", sub_thread)  # noqa: B010 - an extra field
        linked += chats
    for conversation in own:  # checked as built; a link added since is checked again
        for message in conversation.messages:
            if any("subagent_thread_id" in (c.model_extra or {}) for c in message.tool_calls):
                check_message(
                    message, f"{conversation.where}, message {message.agui_id}", max_bytes
                )
    return own + linked


def _by_prompt(chats: list[Conversation], calls: dict[str | None, Any]) -> str | None:
    """The call whose ``prompt`` argument is the subagent's first prompt, if exactly one."""
    first = next((m for m in chats[0].messages if m.role == "user"), None) if chats else None
    if first is None:
        return None
    matches = []
    for call_id, call in calls.items():
        try:
            arguments = json.loads(call.arguments)
        except json.JSONDecodeError:
            continue
        if isinstance(arguments, dict) and arguments.get("prompt") == first.content:
            matches.append(call_id)
    return matches[0] if len(matches) == 1 else None


def _chats(session: _Session, thread_id: str, max_bytes: int) -> list[Conversation]:
    if not session.lines:
        return []
    branches = split_branches(session.lines, session.parents)
    main = thread_id
    result: list[Conversation] = []
    for number, branch in enumerate(branches):
        own_thread = main if number == 0 else f"{main}#branch-{branch.lines[0].uuid}"
        messages: list[Message] = chat_messages(branch.lines, session.label, max_bytes)
        details: dict[str, Any] = {**session.info, "skipped_lines": dict(session.skipped)}
        if number:
            details |= {"branch_of": main, "fork_after": branch.fork_after}
        elif len(branches) > 1:
            details["branches"] = [f"{main}#branch-{b.lines[0].uuid}" for b in branches[1:]]
        title = next((session.titles[u] for u in branch.members if u in session.titles), None)
        result.append(
            Conversation(
                thread_id=own_thread,
                name=title or session.label + ("" if not number else f" (branch {number})"),
                metadata={
                    "source": {"format": "claude-code", "file": session.label},
                    "claude_code": details,
                },
                messages=messages,
                where=session.label if not number else f"{session.label} (branch {number})",
            )
        )
    return result
