"""Reading AG-UI recordings for ``threadkeep import --format agui``: files, pairs, runs.

Layouts (see ``docs/cli.md``):

- a folder per run: ``request.json`` (the ``RunAgentInput``) beside ``response.jsonl`` (the
  events; any ``response.*``), plus files that are not AG-UI at all
  (``metadata.json``, ``summary.json``...), which are skipped with a one-line note each. The
  recording's name is its folder's path under the imported directory;
- turn files paired by name (``X#Turn_01.02.Request.Client...json`` with
  ``X#Turn_01.06.Response.Server...json``);
- loose stream files (a JSON array, JSON Lines, ``data:`` SSE, or an object of named streams).

A recording that is not a run folder is named by its file's path under the imported
directory, the file name cut at a ``#`` turn suffix (``a/X#Turn_01...json`` is ``a/X``,
``a/run.jsonl`` is ``a/run.jsonl``; a named stream is ``<path>#<stream>``); a file directly
under it, or named directly, by its file name (as before). Imports before session 25 named
a file in a subfolder by its file name alone: ``Recording.legacy`` keeps that name, so that
a re-import of such an import finds its chats (``agui._keep_old_keys``).

A malformed AG-UI file (a JSON Lines file of events with a line that is not JSON, a request
that is not a ``RunAgentInput``, a run folder's request or response that is not UTF-8
text) refuses the whole import, before anything is written, naming the file and line (the
fields, for a request). Items among events that are not events (no ``type``; a required
field missing even after the dialect rules, found when the run is read) and SSE ``data:``
blocks that are not JSON (keep-alives) are skipped, counted in one warning per file (per
run, for the second kind). Other files that are not UTF-8 text are skipped with a note.

The files are read in outline first (``_agui_stream``: digests, where each run is, the
requests checked); a run's events and its request are read again only when the run is
imported, so memory holds one run at a time, not the input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ag_ui.core import BaseEvent, RunAgentInput

from .._errors import InvalidArgument
from ._agui_read import Recording, Span
from ._agui_request import RequestRef, digest, normalize_request
from ._agui_stream import SpanReader, outline_file

__all__ = [
    "Recording",
    "RunRecord",
    "digest",
    "normalize_request",
    "read_recordings",
    "runs_of",
]

_SUFFIXES = frozenset({".json", ".jsonl", ".ndjson", ".sse", ".txt", ".events"})
_PAIRED = re.compile(r"^(?P<stem>.+?)(?:\.\d+)?\.(?P<kind>Request|Response)\.")
_FOLDER_KINDS = {"request": "Request", "response": "Response"}
_FOLDER = "\0folder"


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run to import, in outline: a segment of a recording (one ``RUN_STARTED`` on).

    Attributes:
        recording: The recording it is part of.
        thread_id: Its thread (the ``RUN_STARTED``'s, else the request's, else ``"thread"``).
        run_id: Its run id (likewise, else a deterministic ``import:<hash>``).
        span: Where its events are (``None``: a request without a response).
        request: The request it is replayed with (the recording's first run only).
        digest: Its content identity (the recording's digest and its position).
        reader: Reads its events again (shared by the runs of one import).
    """

    recording: Recording
    thread_id: str
    run_id: str
    span: Span | None
    request: RequestRef | None
    digest: str
    reader: SpanReader

    def events(self) -> list[BaseEvent]:
        """The run's events, read again and parsed in full.

        Raises:
            InvalidArgument: If its file changed since it was first read.
        """
        return self.reader.events(self.span) if self.span is not None else []

    def agent_input(self) -> RunAgentInput | None:
        """The run's request, read again (``None`` when it has none).

        Raises:
            InvalidArgument: If the request file changed since it was first read.
        """
        return self.request.load() if self.request is not None else None


def read_recordings(path: Path) -> list[Recording]:
    """Read every recording under ``path`` (a file, its pair, or a directory) in outline.

    Raises:
        InvalidArgument: If ``path`` does not exist; a file named directly holds no AG-UI
            events or request; a directory holds none; an AG-UI file is malformed.
    """
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _SUFFIXES)
        if not files:
            kinds = ", ".join(sorted(_SUFFIXES))
            raise InvalidArgument(f"{path} holds no stream files ({kinds})")
        read = [(f, _read(f, root=path, loose_root=path, strict=False)) for f in files]
        found = _paired(path, read)
        if not found:
            msg = f"no file in {path} holds AG-UI events or a request ({len(files)} read)"
            raise InvalidArgument(msg)
        return found
    if not path.is_file():
        raise InvalidArgument(f"{path}: no such file or directory")
    root = path.parent.parent
    files = [path, *_siblings(path)]
    read = [(f, _read(f, root=root, loose_root=path.parent, strict=f == path)) for f in files]
    return _paired(root, read)


def _pair_of(path: Path) -> tuple[tuple[Path, str], str] | None:
    """Return ``(pairing key, "Request" | "Response")`` of a file that has a partner."""
    match = _PAIRED.match(path.name)
    if match is not None:
        return (path.parent, match["stem"]), match["kind"]
    kind = _FOLDER_KINDS.get(path.stem.lower())
    return ((path.parent, _FOLDER), kind) if kind else None


def _siblings(path: Path) -> list[Path]:
    mine = _pair_of(path)
    if mine is None:
        return []
    return sorted(
        p
        for p in path.parent.iterdir()
        if p != path
        and p.is_file()
        and (other := _pair_of(p)) is not None
        and other[0] == mine[0]
        and other[1] != mine[1]
    )


def _names(path: Path, root: Path) -> tuple[str, str, str]:
    """Return the file's recording name, its label, and the name imports before gave it.

    The label (its path under ``root``) names an object of named streams' recordings;
    see the module docstring for the rule.
    """
    try:
        relative = path.relative_to(root)
    except ValueError:
        relative = Path(path.name)
    pair = _pair_of(path)
    if pair is not None and pair[0][1] == _FOLDER:
        folder = relative.parent.as_posix()
        name = folder if folder not in ("", ".") else path.parent.name or "recording"
        return name, relative.as_posix(), name
    short = path.name.split("#", 1)[0]
    return (relative.parent / short).as_posix(), relative.as_posix(), short


def _read(path: Path, *, root: Path, loose_root: Path, strict: bool) -> list[Recording]:
    """Read one file in outline; a file that is not AG-UI gives ``[]`` and a note."""
    pair = _pair_of(path)
    folder = pair is not None and pair[0][1] == _FOLDER
    name, label, legacy = _names(path, root if folder else loose_root)
    found = outline_file(path, name=name, label=label, strict=strict, pair=folder)
    for recording in found:
        old = recording.name
        if old == name:
            old = legacy
        elif old.startswith(label + "#"):  # a named stream
            old = path.name + old[len(label) :]
        recording.legacy = old if old != recording.name else None
    return found


def _paired(root: Path, read: list[tuple[Path, list[Recording]]]) -> list[Recording]:
    """Attach each request to the response stream beside it (same folder or name stem)."""
    requests: dict[tuple[Path, str], Recording] = {}
    for path, found in read:
        pair = _pair_of(path)
        for recording in found:
            if recording.request is not None and pair is not None:
                requests[pair[0]] = recording
    result: list[Recording] = []
    used: set[tuple[Path, str]] = set()
    for path, found in read:
        pair = _pair_of(path)
        key = pair[0] if pair else None
        for recording in found:
            if recording.request is None:
                if key is not None and key in requests:
                    request = requests[key]
                    recording.request = request.request
                    recording.digest = digest(request.digest, recording.digest)
                    used.add(key)
                result.append(recording)
            elif key is None:
                result.append(recording)
    # A request whose response is missing is still history worth importing.
    result += [r for key, r in requests.items() if key not in used]
    return result


def runs_of(recordings: list[Recording]) -> list[RunRecord]:
    """Split each recording into runs (its request goes to the first)."""
    runs: list[RunRecord] = []
    reader = SpanReader()
    for recording in recordings:
        request = recording.request
        for index, segment in enumerate(recording.segments or [None]):
            first = request if index == 0 else None
            # A RUN_STARTED naming no thread or run (``""``) leaves them to the request.
            started_thread = segment.thread_id if segment else None
            started_run = segment.run_id if segment else None
            thread = started_thread or (first.thread_id if first else None) or "thread"
            run_id = started_run or (first.run_id if first else None)
            runs.append(
                RunRecord(
                    recording=recording,
                    thread_id=thread,
                    run_id=run_id or f"import:{digest(recording.name, str(index))}",
                    span=segment.span if segment else None,
                    request=first,
                    digest=digest(recording.digest, str(index)),
                    reader=reader,
                )
            )
    return runs
