"""Recorded AG-UI event streams become chats (``threadkeep import PATH --format agui``).

Input (``PATH`` a file or a directory; layouts in ``_agui_files`` and ``docs/cli.md``): a
folder per run (``request.json`` + ``response.jsonl`` + files that are not AG-UI, skipped
with a note each), request/response turn files paired by name, or loose streams (a JSON
array, JSON Lines, ``data:`` SSE, an object of named streams). Every file is read and
checked, in outline, before anything is written: a malformed AG-UI file refuses the
import, naming the file and line. Each run is read again, in full, when it is written
(``_agui_stream``: every layout streamed), so memory holds a batch of runs, not the input.
A chat is written whole or not at all (one ``load_chats`` batch; on the ordinary path its
proof is written last, and a re-run completes what an interrupted import left, skipping
the runs it stored); a file that changed between the two reads stops the import at its
run, the chats written before it staying.

A stream splits into runs at each ``RUN_STARTED``; each run is folded by
:class:`threadkeep.agui.StorageAgent` (``write_policy="buffered"``) exactly as a live run,
its request's messages (the user's prompt first) stored as the run's input, so what is
stored equals what the wrapper stores.

Identity:

- chat: ``thread_scope="recording"`` (default): ``agui:<recording>:<threadId>``, where
  ``<recording>`` is the run folder's path under the imported directory, or a loose file's
  path under it (the file name cut at a ``#`` turn suffix, plus ``#<name>`` for a named
  stream), so nine recordings that reuse one thread id are nine chats, and ``a/run.jsonl``
  and ``b/run.jsonl`` are two; ``thread_scope="thread"``: the ``threadId`` itself, so
  recordings of one thread share a chat (the chat a live ``StorageAgent`` on that thread
  uses). Imports before session 25 keyed a loose file by its file name alone: where the
  chat of that old key exists and none of the new keys it splits into does, the runs keep
  the old key (:func:`_keep_old_keys`), so a re-import of such an import writes nothing;
- run: the recording's ``runId``. Each imported run keeps a digest of its recording's text
  in ``metadata["agui_import"]``: a run stored with the same digest is skipped (reported
  already present); a run id held by other content is stored as ``"<runId>#<n>"`` (``n`` =
  2, 3, ...: the first free or same-content one), never skipped.

Some recorders reuse an id, for example a tool call's id as its result's message id. The
run's single batch is then refused and its messages are written one by one: the message
whose id is taken keeps it in ``metadata["agui_id"]``. Nothing is lost; the import logs one
warning saying so (instead of the run wrapper's "not ended in one batch").
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .._errors import InvalidArgument, RunNotFound
from .._models import Chat, Message
from .._paging import MessageFilter
from .._runs import Run, RunStatus
from . import ImportReport, ProgressCallback
from ._agui_bulk import CHAT_PROOF, NAMES, Unsupported, chat_proof
from ._agui_files import RunRecord, normalize_request, read_recordings, runs_of
from ._agui_load import (
    OWNER,
    RUN_DIGEST,
    RunBatch,
    repeated_input,
    replay_input,
    storage_agent,
)
from ._bulk import LOOKUP_BATCH

if TYPE_CHECKING:
    from .._store import Store

__all__ = ["THREAD_SCOPES", "ThreadScope", "import_agui", "normalize_request"]

_log = logging.getLogger("threadkeep.import")
_OWNER = OWNER
DIGEST_NOTE = RUN_DIGEST
"""Run ``metadata`` key holding the digest of the recording an imported run came from."""

ThreadScope = Literal["recording", "thread"]
"""How a recording maps to a chat (see the module docstring)."""
THREAD_SCOPES: tuple[str, ...] = ("recording", "thread")


async def import_agui(
    store: Store,
    path: str | PathLike[str],
    *,
    user_id: str,
    progress: ProgressCallback | None = None,
    thread_scope: ThreadScope = "recording",
    keep_events: bool = False,
) -> ImportReport:
    """Import recorded AG-UI streams (and their requests) from a file or a directory.

    Args:
        store: An open store with the ``steps`` capability.
        path: A stream file, a request file (its response is found beside it), or a
            directory (every ``.json``/``.jsonl``/``.ndjson``/``.sse``/``.txt``/``.events``
            file in it, recursively, in name order).
        user_id: Owner of the imported chats.
        progress: Called as ``progress(0, runs_total)`` once every file is read, then as
            ``progress(runs_done, runs_total)`` after each run is stored.
        thread_scope: ``"recording"`` (a chat per recording and thread id) or ``"thread"``
            (a chat per thread id); see the module docstring.
        keep_events: Keep events that carry no message content (``RAW``, ``CUSTOM``...)
            whole in each run's ``metadata["agui_events"]`` (``StorageAgent(keep_events=)``).

    Returns:
        Counts of chats, messages and tool calls, created versus already present.

    Raises:
        InvalidArgument: If ``path`` does not exist, a file named directly holds no AG-UI
            events or request, a directory holds no file that does, an AG-UI file is
            malformed (the message names the file and line), or ``thread_scope`` is unknown.
            Nothing is written then.
        ThreadkeepError: Any error of the store.
    """
    if thread_scope not in THREAD_SCOPES:
        raise InvalidArgument(f"thread_scope is 'recording' or 'thread', not {thread_scope!r}")
    runs = runs_of(read_recordings(Path(path)))  # in outline: every file checked
    chats = _by_chat(runs, thread_scope)
    old_keys: frozenset[str] = frozenset()
    if thread_scope == "recording":
        chats, old_keys = await _keep_old_keys(store, user_id, runs, chats)
    present = await _all_present(store, user_id, chats)
    if present is not None:  # an unchanged import: proven without parsing every event
        if progress is not None:
            progress(0, len(runs))
            progress(len(runs), len(runs))
        return present
    importer = _Import(store, user_id, keep_events, progress, len(runs), old_keys)
    if progress is not None:
        progress(0, len(runs))  # read: writing starts
    keys = list(chats)
    for start in range(0, len(keys), LOOKUP_BATCH):
        part = keys[start : start + LOOKUP_BATCH]
        found = await store.find_chats(user_id, [k for k in part if _lookable(k)])
        for key in part:
            await importer.chat(key, chats[key], found.get(key))
    await importer.flush()
    return importer.report


def _recording_key(run: RunRecord) -> str:
    return f"agui:{run.recording.name}:{run.thread_id}"


def _old_key(run: RunRecord) -> str | None:
    legacy = run.recording.legacy
    return f"agui:{legacy}:{run.thread_id}" if legacy is not None else None


async def _keep_old_keys(
    store: Store, user_id: str, runs: list[RunRecord], chats: dict[str, list[RunRecord]]
) -> tuple[dict[str, list[RunRecord]], frozenset[str]]:
    """Regroup recordings under the chat key an import before session 25 gave them.

    Those imports keyed a loose file in a subfolder by its file name alone (so ``a/run.jsonl``
    and ``b/run.jsonl`` of one thread id shared a chat). Where the chat of such an old key
    exists, was written by such an import (its proof has no ``names``: :data:`NAMES`) and
    none of the new keys its runs now map to has a chat, those runs (and the runs of a file
    directly under ``PATH``, whose key did not change) keep the old key, in file order, so
    the chat's proof still matches: a re-import writes nothing, and a changed recording is
    imported into the chat it was imported into before.

    Returns:
        ``chats``, regrouped (one ``find_chats`` read per 500 keys when any file has an
        old key; ``chats`` itself when none has), and the old keys kept: the proof written
        to such a chat stays one without ``names``, so that the next import keeps the old
        key too (with ``names``, it split the chat's recordings into new chats, copying them).
    """
    groups: dict[str, set[str]] = {}
    for key, members in chats.items():
        old = _old_key(members[0])
        if old is not None:
            groups.setdefault(old, set()).add(key)
    if not groups:
        return chats, frozenset()
    wanted = sorted({*groups, *(k for keys in groups.values() for k in keys)})
    found: dict[str, Chat] = {}
    for start in range(0, len(wanted), LOOKUP_BATCH):
        part = [k for k in wanted[start : start + LOOKUP_BATCH] if _lookable(k)]
        found.update(await store.find_chats(user_id, part))
    moved = {
        key: old
        for old, keys in groups.items()
        if old in found and _named_by_file(found[old]) and not keys & found.keys()
        for key in keys
    }
    if not moved:
        return chats, frozenset()
    regrouped: dict[str, list[RunRecord]] = {}
    for run in runs:
        key = _recording_key(run)
        regrouped.setdefault(moved.get(key, key), []).append(run)
    return regrouped, frozenset(moved.values())


def _by_chat(runs: list[RunRecord], thread_scope: ThreadScope) -> dict[str, list[RunRecord]]:
    """The runs by the key of their chat (module docstring, "Identity"), in order."""
    chats: dict[str, list[RunRecord]] = {}
    for run in runs:
        key = run.thread_id if thread_scope == "thread" else _recording_key(run)
        chats.setdefault(key, []).append(run)
    return chats


async def _all_present(
    store: Store, user_id: str, chats: dict[str, list[RunRecord]]
) -> ImportReport | None:
    """The counts of an import whose every chat proves its runs stored, else ``None``."""
    report = ImportReport()
    keys = list(chats)
    for start in range(0, len(keys), LOOKUP_BATCH):
        part = keys[start : start + LOOKUP_BATCH]
        found = await store.find_chats(user_id, [k for k in part if _lookable(k)])
        for key in part:
            proof = chat_proof(key, [run.digest for run in chats[key]])
            present = _proven(found.get(key), proof)
            if present is None:
                return None
            report.merge(present)
    return report


@dataclass
class _Import:
    """One import's chats, each by the fastest path that stores what ``StorageAgent`` does.

    A chat whose proof (:data:`._agui_bulk.CHAT_PROOF`) names exactly these recordings is
    present (found by the one read before); the runs of a new chat are folded in memory,
    in order, and written in a ``load_chats`` batch (:mod:`._agui_load`); any other chat
    (one that exists, or whose runs the stand-in does not emulate) has its runs replayed
    one by one through ``StorageAgent`` against the store (:func:`_import_run`), and then
    gets its proof.
    """

    store: Store
    user_id: str
    keep_events: bool
    progress: ProgressCallback | None
    total: int
    old_keys: frozenset[str] = frozenset()
    """Chats kept under the key an import before session 25 gave them (``_keep_old_keys``)."""
    report: ImportReport = field(default_factory=ImportReport)
    done: int = 0
    waiting: int = 0
    batch: RunBatch = field(init=False)

    def __post_init__(self) -> None:
        self.batch = RunBatch(self.store, self.user_id, self.keep_events, _refused_batches)

    async def chat(self, key: str, runs: list[RunRecord], chat: Chat | None) -> None:
        """Import the runs of one chat (``chat``: the live chat of ``key``, if any)."""
        proof = chat_proof(key, [run.digest for run in runs])
        present = _proven(chat, proof)
        if present is not None:
            self.report.merge(present)
            self._advance(len(runs))
            return
        if chat is None:
            try:
                await self.batch.add(runs, key, proof)
            except Unsupported:
                pass  # nothing written: the ordinary path below
            else:
                self.waiting += len(runs)
                if self.batch.full():
                    await self.flush()
                return
        await self._one_by_one(key, runs, proof)

    async def flush(self) -> None:
        """Write the batch of new chats."""
        written, taken = await self.batch.flush()
        self.report.merge(written)
        waiting, self.waiting = self.waiting - sum(len(runs) for runs, _ in taken), 0
        self._advance(waiting)
        for runs, key in taken:
            await self._one_by_one(key, runs, chat_proof(key, [run.digest for run in runs]))

    async def _one_by_one(self, key: str, runs: list[RunRecord], proof: str) -> None:
        counted: set[str] = set()
        part = ImportReport()
        clean = True
        wrote = False
        for run in runs:
            run_report, stored_whole, present = await _import_run(
                self.store, self.user_id, run, key, counted, keep_events=self.keep_events
            )
            part.merge(run_report)
            clean = clean and stored_whole
            wrote = wrote or not present
            self._advance(1)
        self.report.merge(part)
        chat = await self.store.find_chat(self.user_id, key) if clean else None
        if chat is None or (not wrote and CHAT_PROOF in chat.metadata):
            return  # every run was stored already: its proof (another set's) stays
        # Written last: every run of the chat is stored.
        counts = {"messages": part.messages, "tool_calls": part.tool_calls}
        note: dict[str, Any] = {"digest": proof, "counts": counts}
        if key not in self.old_keys:  # an old key's chat stays one (see _keep_old_keys)
            note["names"] = NAMES
        metadata = {**chat.metadata, CHAT_PROOF: note}
        await self.store.update_chat(chat.chat_id, metadata=metadata)

    def _advance(self, runs: int) -> None:
        for _ in range(runs):
            self.done += 1
            if self.progress is not None:
                self.progress(self.done, self.total)


def _named_by_file(chat: Chat) -> bool:
    """Whether an import before session 25 (which named a loose file by its name) wrote it."""
    note = chat.metadata.get(CHAT_PROOF)
    return not isinstance(note, dict) or note.get("names") != NAMES


def _lookable(key: str) -> bool:
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _proven(chat: Chat | None, proof: str) -> ImportReport | None:
    """The counts of a chat whose proof names exactly these recordings, or ``None``."""
    note = chat.metadata.get(CHAT_PROOF) if chat is not None else None
    if not isinstance(note, dict) or note.get("digest") != proof:
        return None
    counts = note.get("counts")
    messages = counts.get("messages") if isinstance(counts, dict) else None
    calls = counts.get("tool_calls") if isinstance(counts, dict) else None
    if type(messages) is not int or type(calls) is not int:
        return None
    return ImportReport(chats_present=1, messages_present=messages, tool_calls_present=calls)


# -- the ordinary path: a run at a time -----------------------------------------------------


async def _import_run(
    store: Store,
    user_id: str,
    run: RunRecord,
    thread_key: str,
    chats: set[str],
    *,
    keep_events: bool,
) -> tuple[ImportReport, bool, bool]:
    """Import one run; ``chats`` holds the thread keys this import has counted already.

    Returns:
        The counts, whether the run is stored whole (ended with its digest, no write of it
        refused), and whether it was stored already (nothing written).
    """
    report = ImportReport()
    chat = await store.find_chat(user_id, thread_key)
    if chat is None:
        chat = await store.create_chat(user_id, thread_key, name=run.recording.name)
        report.chats_created += 1
    elif thread_key not in chats:
        report.chats_present += 1
    chats.add(thread_key)
    run_id, present = await _run_slot(store, chat.chat_id, run)
    if present:
        stored = await _run_messages(store, chat.chat_id, run_id)
        report.messages_present += len(stored)
        report.tool_calls_present += sum(len(m.tool_calls) for m in stored)
        await _count_held_input(store, chat.chat_id, run, stored, report)
        return report, True, True
    agent = storage_agent(store, run, user_id=user_id, keep_events=keep_events)
    with _refused_batches() as refused:
        async for _event in agent.run(replay_input(run, thread_key, run_id)):
            pass
    stored = await _run_messages(store, chat.chat_id, run_id)
    if refused:
        _warn_refused(run, stored, refused)
    report.messages_created += len(stored)
    report.tool_calls_created += sum(len(m.tool_calls) for m in stored)
    await _count_held_input(store, chat.chat_id, run, stored, report)
    ended = await store.get_run(chat.chat_id, run_id)
    whole = not refused.errors and ended.metadata.get(DIGEST_NOTE) == run.digest
    return report, whole, False


async def _count_held_input(
    store: Store, chat_id: Any, run: RunRecord, stored: list[Message], report: ImportReport
) -> None:
    """Count as present the run's request messages the chat held before the run.

    See :func:`._agui_load.repeated_input` (the bulk path counts them the same way).
    """
    for agui_id in repeated_input(run.agent_input(), stored):
        found = await store.get_message_by_agui_id(chat_id, agui_id)
        if found is not None:
            report.messages_present += 1
            report.tool_calls_present += len(found.tool_calls)


async def _run_slot(store: Store, chat_id: Any, run: RunRecord) -> tuple[str, bool]:
    """Return ``(run id, already stored)`` for a recorded run (module docstring, "Identity").

    A run whose id holds this recording's digest is the same run; an import of this
    recording that stopped before the run's end (active, the importer's, no digest yet) is
    continued under its id; any other run holding the id is another recording's.
    """
    for n in range(1, 10_000):
        run_id = run.run_id if n == 1 else f"{run.run_id}#{n}"
        try:
            held: Run = await store.get_run(chat_id, run_id)
        except RunNotFound:
            return run_id, False
        if held.metadata.get(DIGEST_NOTE) == run.digest:
            return run_id, True
        if (
            held.status is RunStatus.ACTIVE
            and held.owner == _OWNER
            and DIGEST_NOTE not in held.metadata
        ):
            return run_id, False
    raise InvalidArgument(f"run id {run.run_id!r} is used by 10,000 other runs of one chat")


_BATCH_REFUSED = "not ended in one batch"
_AGENT_LOG = logging.getLogger("threadkeep.agui")


@dataclass
class _Refusals:
    """The run wrapper's "not ended in one batch" warnings, and whether errors followed."""

    warnings: list[str] = field(default_factory=list)
    errors: int = 0

    def __bool__(self) -> bool:
        return bool(self.warnings)


@contextmanager
def _refused_batches() -> Iterator[_Refusals]:
    """Collect (and hold back) the run wrapper's "not ended in one batch" warnings."""
    refused = _Refusals()

    def hold(record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            refused.errors += 1
        elif record.levelno == logging.WARNING and _BATCH_REFUSED in record.getMessage():
            refused.warnings.append(record.getMessage().removeprefix("threadkeep: "))
            return False
        return True

    _AGENT_LOG.addFilter(hold)
    try:
        yield refused
    finally:
        _AGENT_LOG.removeFilter(hold)


def _warn_refused(run: RunRecord, stored: list[Message], refused: _Refusals) -> None:
    moved = [
        repr(m.metadata["agui_id"])
        for m in stored
        if m.agui_id is None and m.metadata.get("agui_id")
    ]
    outcome = (
        f"{len(stored)} of its messages are stored; see the errors above for the rest"
        if refused.errors
        else f"all {len(stored)} of its messages are stored"
    )
    if moved:
        _log.warning(
            "%s: run %r reuses the message id %s of an earlier message of the chat, so its "
            "messages were written one by one and the repeated id is kept in "
            "metadata['agui_id']; %s",
            run.recording.name,
            run.run_id,
            ", ".join(moved),
            outcome,
        )
    else:
        _log.warning(
            "%s: %s; its messages were then written one by one: %s",
            run.recording.name,
            "; ".join(refused.warnings),
            outcome,
        )


async def _run_messages(store: Store, chat_id: Any, run_id: str) -> list[Message]:
    messages: list[Message] = []
    cursor: str | None = None
    while True:
        page = await store.list_messages(
            chat_id, limit=200, cursor=cursor, message_filter=MessageFilter(run_id=run_id)
        )
        messages += page.items
        if not page.has_more:
            return messages
        cursor = page.next_cursor
