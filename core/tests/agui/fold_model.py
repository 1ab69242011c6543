"""A model of what an AG-UI stream MEANS, Hypothesis strategies drawing it, and its wire text.

Not a test module (loaded with ``importlib`` by ``test_fold_generative.py``). A drawn
:class:`Conversation` is a list of runs; each run is the input a client sends (its new
prompt, the history it sends back with the ids it had or with fresh ones) and what the agent
meant to say (text messages holding tool calls, tool results, reasoning), plus how the stack
said it: the event forms (``START/CONTENT/END`` or ``*_CHUNK``, with or without ids after
the first chunk), interleaving of parallel messages and of parallel calls' ``ARGS``, missing
``*_END`` events, a result with or without ``messageId`` and under ``content`` or
``result``, camelCase or snake_case keys, deltas split between the two halves of a UTF-16
surrogate pair (as JavaScript stacks split them), empty deltas, ``NUL``, events with no
message content (state, steps, ``RAW``, ``CUSTOM``, unknown types) anywhere between records,
a ``MESSAGES_SNAPSHOT`` after the stream (equal, fresh ids, a text the stream cut short, a
disagreeing text), and the run's end (``RUN_FINISHED``, ``RUN_ERROR`` in four spellings in
the middle of a message, or a cut stream).

:func:`render` turns a run into wire dicts; :func:`expected` computes, from the model alone,
the records the store must hold afterwards (the oracle the test compares with).
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

THREAD = "t-gen"

# -- the model ---------------------------------------------------------------------------


@dataclass
class Result:
    """A ``TOOL_CALL_RESULT`` answering its call."""

    content: str
    message_id: str | None  # None: the stack sent no messageId (id ``result:<call id>``)
    key: str  # "content" or "result"


@dataclass
class Call:
    """A tool call nested in its text message."""

    id: str
    name: str
    arguments: str
    pieces: list[str]  # the ARGS deltas (joined: ``arguments``)
    chunked: bool  # TOOL_CALL_CHUNK form
    chunk_ids: bool  # later chunks repeat toolCallId
    ended: bool  # TOOL_CALL_END sent (events form)
    result: Result | None


@dataclass
class Text:
    """An assistant text message (possibly empty: the parent of its calls).

    ``id`` ``None``: no text events at all, calls naming no parent after a tool result or
    at the run's start (ADK, AG2): the fold opens an assistant message for them.
    """

    id: str | None
    text: str
    pieces: list[str]
    chunked: bool
    chunk_ids: bool
    ended: bool
    calls: list[Call]
    silent: bool = False  # no text events at all: only the parent its calls name (Strands)


@dataclass
class Reasoning:
    """A reasoning message (``REASONING_*`` with an id, or ``THINKING_*`` without)."""

    id: str
    text: str
    pieces: list[str]
    form: str  # "events" (REASONING_*), "chunk" (REASONING_MESSAGE_CHUNK), "thinking"
    chunk_ids: bool
    ended: bool  # REASONING_MESSAGE_END / REASONING_END sent
    encrypted: str | None

    @property
    def thinking(self) -> bool:
        return self.form == "thinking"


@dataclass
class Group:
    """Text messages streamed together (starts in order, the rest interleaved), their calls."""

    texts: list[Text]
    order: list[int]  # interleaving of the texts' CONTENT/END events (an index per event)
    call_order: list[int]  # interleaving of the events-form calls' ARGS/END events
    result_order: list[int]  # the order results arrive in (indexes into the answered calls)
    noise: list[dict[str, Any]]  # events without message content inside the group
    parentless: bool  # the calls name no parent (they join the latest assistant message)


@dataclass
class Run:
    """One run: what the client sends and what the agent streams."""

    run_id: str
    prompt_id: str
    prompt: str
    history: str  # "none", "ids" (as stored) or "fresh" (new ids, LlamaIndex/ADK)
    segments: list[Any]  # Group | Reasoning | dict (an event without message content)
    end: str  # "finished", "cut", "error:message", "error:string", "error:object", "error:none"
    error_inside: bool  # RUN_ERROR before the last text message's END (it stays open)
    snapshot: str  # "none", "equal", "fresh", "extend", "disagree", "disagree_args"
    snake: bool
    running: bool = False  # a snapshot after RUN_STARTED and after each group (Strands)


@dataclass
class Conversation:
    """Runs on one thread, in order."""

    runs: list[Run]
    replay: bool  # deliver the last run again (a retry)
    run_ids_seen: list[str] = field(default_factory=list)


# -- strategies ----------------------------------------------------------------------------

_ALPHABET = st.one_of(
    st.sampled_from('abc xyz.,\n\x00\t"\\{}'),
    st.sampled_from(["é", "ß", "中", "\u200b", "\U0001f600", "\U0001f9e0", "\U00010348"]),
    st.characters(codec="utf-8", categories=["L", "N", "P", "S", "Zs"]),
)
TEXT = st.text(_ALPHABET, max_size=24)


@st.composite
def pieces_of(draw: st.DrawFn, text: str, allow_empty: bool = True) -> list[str]:
    """Split ``text`` into deltas at UTF-16 code unit boundaries (a pair may be split)."""
    units = text.encode("utf-16-le")
    n = len(units) // 2
    cuts = sorted(draw(st.sets(st.integers(1, max(n - 1, 1)), max_size=min(n, 4)))) if n > 1 else []
    bounds = [0, *[c for c in cuts if 0 < c < n], n]
    out = [
        units[2 * a : 2 * b].decode("utf-16-le", "surrogatepass")
        for a, b in itertools.pairwise(bounds)
    ]
    out = [p for p in out if p] or ([""] if not text else out)
    if allow_empty and draw(st.booleans()) and draw(st.booleans()):
        at = draw(st.integers(0, len(out)))
        out.insert(at, "")  # an empty delta, as several stacks send
    return out


def repair_join(pieces: list[str]) -> str:
    """The text deltas make once joined (split surrogate pairs paired again)."""
    return "".join(pieces).encode("utf-16-le", "surrogatepass").decode("utf-16-le")


class Ids:
    """Unique ids within a drawn conversation."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}-{self.n}"


@st.composite
def calls(draw: st.DrawFn, ids: Ids) -> list[Call]:
    out = []
    for _ in range(draw(st.integers(0, 3))):
        args = json.dumps(
            draw(st.dictionaries(st.sampled_from(["city", "q", "n"]), TEXT, max_size=2)),
            ensure_ascii=draw(st.booleans()),
        )
        chunked = draw(st.booleans()) and draw(st.booleans())
        answered = draw(st.booleans()) or draw(st.booleans())
        result = None
        if answered:
            result = Result(
                content=draw(TEXT),
                message_id=ids("res") if draw(st.booleans()) else None,
                key=draw(st.sampled_from(["content", "result"])),
            )
        out.append(
            Call(
                id=ids("call"),
                name=draw(st.sampled_from(["get_weather", "search", "lookup"])),
                arguments=args,
                pieces=draw(pieces_of(args, allow_empty=False)),
                chunked=chunked,
                chunk_ids=draw(st.booleans()),
                ended=chunked or draw(st.booleans()) or draw(st.booleans()),
                result=result,
            )
        )
    return out


NOISE = st.sampled_from(
    [
        {"type": "STATE_SNAPSHOT", "snapshot": {"k": 1, "s": "x"}},
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/k", "value": 2}]},
        {"type": "STEP_STARTED", "stepName": "agent"},
        {"type": "STEP_FINISHED", "stepName": "agent"},
        {"type": "RAW", "event": {"kind": "on_chat_model_stream", "data": {"x": 1}}},
        {"type": "CUSTOM", "name": "progress", "value": {"pct": 50}},
        {"type": "VENDOR_HEARTBEAT", "at": 3},
    ]
)


@st.composite
def groups(draw: st.DrawFn, ids: Ids, orphan_ok: bool) -> Group:
    if orphan_ok and draw(st.booleans()) and draw(st.booleans()):
        found = draw(calls(ids).filter(bool))
        # id None: the calls name no parent (ADK, AG2); else a parent id no text event used
        # (Strands rotates its message id before each call)
        ghost = ids("ghost") if draw(st.booleans()) else None
        text = Text(ghost, "", [], False, False, True, found, silent=True)
        parentless = ghost is None
        return Group(
            [text], [], _call_slots([text], draw), _result_order([text], draw), [], parentless
        )
    texts = []
    for _ in range(draw(st.integers(1, 3))):
        text = draw(TEXT)
        chunked = draw(st.booleans()) and draw(st.booleans())
        texts.append(
            Text(
                id=ids("txt"),
                text=text,
                pieces=draw(pieces_of(text)),
                chunked=chunked,
                chunk_ids=draw(st.booleans()),
                ended=chunked or draw(st.booleans()) or draw(st.booleans()),
                calls=draw(calls(ids)),
            )
        )
    plain = [i for i, t in enumerate(texts) if not t.chunked]
    slots = [i for i in plain for _ in range(len(texts[i].pieces) + 1)]
    order = draw(st.permutations(slots)) if draw(st.booleans()) else slots
    noise = draw(st.lists(NOISE, max_size=2))
    parentless = len(texts) == 1 and draw(st.booleans())
    return Group(
        texts,
        list(order),
        _call_slots(texts, draw),
        _result_order(texts, draw),
        noise,
        parentless,
    )


def _call_slots(texts: list[Text], draw: st.DrawFn) -> list[int]:
    ev_calls = [c for t in texts for c in t.calls if not c.chunked]
    call_slots = [i for i, c in enumerate(ev_calls) for _ in range(len(c.pieces) + 1)]
    return list(draw(st.permutations(call_slots))) if draw(st.booleans()) else call_slots


def _result_order(texts: list[Text], draw: st.DrawFn) -> list[int]:
    answered = [c for t in texts for c in t.calls if c.result is not None]
    return list(draw(st.permutations(list(range(len(answered))))))


@st.composite
def reasonings(draw: st.DrawFn, ids: Ids) -> Reasoning:
    text = draw(TEXT.filter(bool))
    form = draw(st.sampled_from(["events", "chunk", "thinking"]))
    return Reasoning(
        id=ids("think"),
        text=text,
        pieces=draw(pieces_of(text, allow_empty=False)),
        form=form,
        chunk_ids=draw(st.booleans()),
        ended=form != "events" or draw(st.booleans()) or draw(st.booleans()),
        encrypted=None
        if form == "thinking" or draw(st.booleans())
        else draw(st.sampled_from(["sig==", "Eq=="])),
    )


@st.composite
def runs(draw: st.DrawFn, ids: Ids, index: int, prompts: list[str], reused: bool) -> Run:
    segments: list[Any] = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["group", "group", "reasoning", "noise"]))
        if kind == "group":
            segments.append(draw(groups(ids, _orphan_ok(segments))))
        elif kind == "reasoning":
            segments.append(draw(reasonings(ids)))
        else:
            segments.append(draw(NOISE))
    end = draw(
        st.sampled_from(
            ["finished", "finished", "finished", "cut"]
            + [f"error:{k}" for k in ("message", "string", "object", "none")]
        )
    )
    last = _last_text(segments)
    error_inside = end.startswith("error") and last is not None and draw(st.booleans())
    if error_inside and last is not None:
        last.ended = False  # a chunk-form text is left open by the error when its chunks are last
    reuse = index > 0 and draw(st.booleans())
    history = "none" if index == 0 else draw(st.sampled_from(["none", "ids", "fresh"]))
    if history == "ids" and reused:
        history = "fresh"  # a client that sent two prompts as msg-1 holds no ids to send back
    if history != "none":
        reuse = False  # msg-1 every prompt: a stateless front end, sending no history
    # a prompt typed again (same text), under msg-1 again or under a new id
    prompt = draw(st.sampled_from(prompts)) if index > 0 and draw(st.booleans()) else draw(TEXT)
    return Run(
        run_id=f"run-{index + 1}",
        prompt_id="msg-1" if reuse or index == 0 else ids("user"),
        prompt=prompt,
        history=history,
        segments=segments,
        end=end,
        error_inside=error_inside,
        snapshot=draw(
            st.sampled_from(
                ["none", "none", "equal", "fresh", "extend", "disagree", "disagree_args"]
            )
        )
        if end == "finished"
        else "none",
        snake=draw(st.booleans()),
        running=draw(st.booleans()) and draw(st.booleans()),
    )


@st.composite
def conversations(draw: st.DrawFn) -> Conversation:
    """A conversation of one to three runs on one thread."""
    ids = Ids()
    out: list[Run] = []
    prompts: list[str] = []
    for index in range(draw(st.integers(1, 3))):
        run = draw(
            runs(
                ids,
                index,
                prompts or ["hello"],
                reused=any(r.prompt_id == "msg-1" for r in out[1:]),
            )
        )
        prompts.append(run.prompt)
        out.append(run)
    if draw(st.booleans()) and draw(st.booleans()):
        for run in out:  # providers that number calls per turn: call_0 in every run
            for n, call in enumerate(_calls(run)):
                call.id = f"call_{n}"
                # Known open defect (docs/run-persistence.md): with no messageId, run N's
                # result:call_0 meets an earlier run's in a MESSAGES_SNAPSHOT and takes its
                # text; results here carry ids until the fold tells the two apart.
                if call.result is not None and call.result.message_id is None:
                    call.result.message_id = ids("res")
    return Conversation(out, replay=draw(st.booleans()))


def _calls(run: Run) -> list[Call]:
    return [c for s in run.segments if isinstance(s, Group) for t in s.texts for c in t.calls]


def _orphan_ok(segments: list[Any]) -> bool:
    """Calls naming no parent open their own message: first, or right after a tool result."""
    content = [s for s in segments if not isinstance(s, dict)]
    if not content:
        return True
    last = content[-1]
    return isinstance(last, Group) and bool(last.result_order)


def _last_text(segments: list[Any]) -> Text | None:
    texts = [t for s in segments if isinstance(s, Group) for t in s.texts if not t.silent]
    return texts[-1] if texts else None


def _last_call(segments: list[Any]) -> Call | None:
    found = [c for s in segments if isinstance(s, Group) for t in s.texts for c in t.calls]
    return found[-1] if found else None


# -- rendering -----------------------------------------------------------------------------

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def _snake(event: dict[str, Any]) -> dict[str, Any]:
    return {_CAMEL.sub("_", k).lower() if k != "type" else k: v for k, v in event.items()}


def _text_events(text: Text) -> list[list[dict[str, Any]]]:
    """The text's START and then one list per CONTENT (the END last, if sent)."""
    if text.chunked:
        out = []
        for i, piece in enumerate(text.pieces):
            chunk: dict[str, Any] = {"type": "TEXT_MESSAGE_CHUNK", "delta": piece, OWNER: text.id}
            if i == 0:
                chunk.update(messageId=text.id, role="assistant")
            elif text.chunk_ids:
                chunk["messageId"] = text.id
            out.append([chunk])
        return out
    start = [{"type": "TEXT_MESSAGE_START", "messageId": text.id, "role": "assistant"}]
    body = [
        [{"type": "TEXT_MESSAGE_CONTENT", "messageId": text.id, "delta": p}] for p in text.pieces
    ]
    end = [[{"type": "TEXT_MESSAGE_END", "messageId": text.id}] if text.ended else []]
    return [start, *body, *end]


def _call_events(call: Call, parent: str | None) -> list[list[dict[str, Any]]]:
    named = {} if parent is None else {"parentMessageId": parent}
    if call.chunked:
        out = []
        for i, piece in enumerate(call.pieces):
            chunk: dict[str, Any] = {"type": "TOOL_CALL_CHUNK", "delta": piece, OWNER: call.id}
            if i == 0:
                chunk.update(toolCallId=call.id, toolCallName=call.name, **named)
            elif call.chunk_ids:
                chunk["toolCallId"] = call.id
            out.append([chunk])
        return out
    start = [{"type": "TOOL_CALL_START", "toolCallId": call.id, "toolCallName": call.name, **named}]
    body = [[{"type": "TOOL_CALL_ARGS", "toolCallId": call.id, "delta": p}] for p in call.pieces]
    end = [[{"type": "TOOL_CALL_END", "toolCallId": call.id}] if call.ended else []]
    return [start, *body, *end]


def _merge(queues: list[list[list[dict[str, Any]]]], order: list[int]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in order:
        out.extend(queues[i].pop(0))
    return out


def _group_events(group: Group, error: dict[str, Any] | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    plain = {
        i: _text_events(t) for i, t in enumerate(group.texts) if not t.silent and not t.chunked
    }
    for i, text in enumerate(group.texts):  # starts in order; chunked texts whole
        if text.silent:
            continue
        if text.chunked:
            out.extend(e for part in _text_events(text) for e in part)
        else:
            out.extend(plain[i].pop(0))
    queues = [plain.get(i, []) for i in range(len(group.texts))]
    body = _merge(queues, group.order)
    out.extend(body[: len(body) // 2])
    out.extend(group.noise)
    out.extend(body[len(body) // 2 :])

    def parent(text: Text) -> str | None:
        return None if group.parentless else text.id

    ev_calls = [(c, parent(t)) for t in group.texts for c in t.calls if not c.chunked]
    call_queues = [_call_events(c, named) for c, named in ev_calls]
    for q in call_queues:
        out.extend(q.pop(0))
    for text in group.texts:  # chunked calls: each whole, after the starts
        for call in text.calls:
            if call.chunked:
                out.extend(e for part in _call_events(call, parent(text)) for e in part)
    out.extend(_merge(call_queues, group.call_order))
    answered = [c for t in group.texts for c in t.calls if c.result is not None]
    out.extend(_result_event(answered[i]) for i in group.result_order)
    return out


def _result_event(call: Call) -> dict[str, Any]:
    assert call.result is not None
    event: dict[str, Any] = {"type": "TOOL_CALL_RESULT", "toolCallId": call.id}
    if call.result.message_id is not None:
        event["messageId"] = call.result.message_id
    event[call.result.key] = call.result.content
    return event


def _reasoning_events(r: Reasoning) -> list[dict[str, Any]]:
    if r.thinking:
        return [
            {"type": "THINKING_START"},
            {"type": "THINKING_TEXT_MESSAGE_START"},
            *[{"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": p} for p in r.pieces],
            {"type": "THINKING_TEXT_MESSAGE_END"},
            {"type": "THINKING_END"},
        ]
    out: list[dict[str, Any]] = [{"type": "REASONING_START", "messageId": r.id}]
    if r.form == "chunk":
        for i, piece in enumerate(r.pieces):
            chunk: dict[str, Any] = {"type": "REASONING_MESSAGE_CHUNK", "delta": piece}
            if i == 0 or r.chunk_ids:
                chunk["messageId"] = r.id
            out.append(chunk)
    else:
        out.append({"type": "REASONING_MESSAGE_START", "messageId": r.id, "role": "reasoning"})
        out += [
            {"type": "REASONING_MESSAGE_CONTENT", "messageId": r.id, "delta": p} for p in r.pieces
        ]
        if r.ended:
            out.append({"type": "REASONING_MESSAGE_END", "messageId": r.id})
    if r.encrypted is not None:
        out.append(
            {
                "type": "REASONING_ENCRYPTED_VALUE",
                "subtype": "message",
                "entityId": r.id,
                "encryptedValue": r.encrypted,
            }
        )
    if r.ended:
        out.append({"type": "REASONING_END", "messageId": r.id})
    return out


ERRORS = {
    "error:message": {"type": "RUN_ERROR", "message": "boom", "code": "E1"},
    "error:string": {"type": "RUN_ERROR", "error": "boom"},
    "error:object": {"type": "RUN_ERROR", "error": {"message": "boom", "code": "E2"}},
    "error:none": {"type": "RUN_ERROR"},
}


OWNER = "__owner"
"""A key marking the record a chunk belongs to while rendering (removed from the wire)."""


def render(conversation: Conversation, index: int) -> list[dict[str, Any]]:
    """The wire events of run ``index`` (camelCase, or snake_case when the run says so)."""
    out = _render(conversation, index)
    return [{k: v for k, v in e.items() if k != OWNER} for e in out]


def open_chunk(conversation: Conversation, index: int) -> str | None:
    """The id of the chunk-opened record no event closes before the run's end, if any.

    A chunk-opened message or call ends when another kind of event arrives (AG-UI chunk
    rules); the run's terminal event does not count, so a cut or errored run leaves it open.
    """
    out = [e for e in _render(conversation, index) if e["type"] not in _TERMINALS]
    return out[-1].get(OWNER) if out else None


_TERMINALS = {"RUN_FINISHED", "RUN_ERROR", "run_finished", "run_error"}


def _render(conversation: Conversation, index: int) -> list[dict[str, Any]]:
    run = conversation.runs[index]
    out: list[dict[str, Any]] = [{"type": "RUN_STARTED", "threadId": THREAD, "runId": run.run_id}]
    request = request_messages(conversation, index)
    if run.running:  # the seeded thread
        out.append({"type": "MESSAGES_SNAPSHOT", "messages": request})
    for done, segment in enumerate(run.segments, 1):
        if isinstance(segment, Group):
            out.extend(_group_events(segment, None))
            if run.running:  # the thread so far
                sofar = [*request, *run_messages(run, upto=done)]
                out.append({"type": "MESSAGES_SNAPSHOT", "messages": sofar})
        elif isinstance(segment, Reasoning):
            out.extend(_reasoning_events(segment))
        else:
            out.append(dict(segment))
    if run.snapshot != "none":
        out.append({"type": "MESSAGES_SNAPSHOT", "messages": snapshot(conversation, index)})
    if run.end == "finished":
        out.append({"type": "RUN_FINISHED", "threadId": THREAD, "runId": run.run_id})
    elif run.end.startswith("error"):
        out.append(dict(ERRORS[run.end]))
    if run.snake:
        out = [_snake(e) for e in out]
    return out


# -- the meaning: messages as a client holds them, and the records a store must hold -------


def run_messages(run: Run, upto: int | None = None) -> list[dict[str, Any]]:
    """The run's streamed messages as an AG-UI client holds them afterwards (ids as sent).

    ``upto``: only those of the first ``upto`` segments.
    """
    out: list[dict[str, Any]] = []
    for segment in run.segments[:upto]:
        if not isinstance(segment, Group):
            continue
        for text in segment.texts:
            # a client opens a message for calls naming no parent under the first call's id
            message_id = text.id or text.calls[0].id
            message: dict[str, Any] = {"id": message_id, "role": "assistant", "content": text.text}
            if text.calls:
                message["toolCalls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for c in started_calls(text)
                ]
            out.append(message)
        answered = [c for t in segment.texts for c in t.calls if c.result is not None]
        for i in segment.result_order:
            call = answered[i]
            assert call.result is not None
            out.append(
                {
                    "id": call.result.message_id or f"result:{call.id}",
                    "role": "tool",
                    "content": call.result.content,
                    "toolCallId": call.id,
                }
            )
    return out


def _prompt(run: Run) -> dict[str, Any]:
    return {"id": run.prompt_id, "role": "user", "content": run.prompt}


def request_messages(conversation: Conversation, index: int) -> list[dict[str, Any]]:
    """What the client sends as ``RunAgentInput.messages`` for run ``index``."""
    run = conversation.runs[index]
    if run.history == "none" or index == 0:
        return [_prompt(run)]
    history = client_view(conversation, index - 1)
    if run.history == "fresh":
        history = _fresh(history, f"h{index}")
    return [*history, _prompt(run)]


def client_view(conversation: Conversation, index: int) -> list[dict[str, Any]]:
    """The messages an AG-UI client holds after run ``index`` (a snapshot replaces them)."""
    run = conversation.runs[index]
    if run.snapshot != "none":
        return snapshot(conversation, index)
    held = client_view(conversation, index - 1) if index else []
    if _prompt(run) not in held:  # msg-1 sent again with its text: one message
        held.append(_prompt(run))
    return [*held, *run_messages(run)]


def _fresh(messages: list[dict[str, Any]], tag: str) -> list[dict[str, Any]]:
    return [{**m, "id": f"{tag}-{i}-{m['id']}-x"} for i, m in enumerate(messages)]


def snapshot(conversation: Conversation, index: int) -> list[dict[str, Any]]:
    """The ``MESSAGES_SNAPSHOT`` run ``index`` ends with."""
    run = conversation.runs[index]
    messages = [*request_messages(conversation, index), *run_messages(run)]
    if run.snapshot == "fresh":
        return _fresh(messages, f"s{index}")
    target = _snapshot_target(run)
    call = _snapshot_call(run)
    for m in messages:
        if target is not None and m["id"] == target.id:
            m["content"] = _snapshot_text(run, target)
        if call is not None and any(c["id"] == call.id for c in m.get("toolCalls", [])):
            m["toolCalls"] = [
                {**c, "function": {**c["function"], "arguments": SNAPSHOT_ARGUMENTS}}
                if c["id"] == call.id
                else c
                for c in m["toolCalls"]
            ]
    return messages


SNAPSHOT_ARGUMENTS = '{"other": 1}'
"""The arguments a disagreeing snapshot gives the run's last call (JSON, as the stream's)."""


def _snapshot_call(run: Run) -> Call | None:
    return _last_call(run.segments) if run.snapshot == "disagree_args" else None


def _snapshot_target(run: Run) -> Text | None:
    if run.snapshot not in ("extend", "disagree"):
        return None
    return _last_text(run.segments)


def _snapshot_text(run: Run, text: Text) -> str:
    return text.text + " (more)" if run.snapshot == "extend" else "other words"


def status_at_end(run: Run, ended: bool) -> str:
    """The status of a record at the run's end (``ended``: its END arrived)."""
    if ended or run.end == "finished":
        return "complete"
    return "interrupted" if run.end == "cut" else "errored"


def expected(conversation: Conversation, upto: int) -> list[tuple[Any, ...]]:
    """The records the chat must hold after runs ``0..upto``, oldest first (the oracle)."""
    records: list[tuple[Any, ...]] = []
    prompts: dict[str, str] = {}  # stored id -> content, for the reused ``msg-1``
    for index, run in enumerate(conversation.runs[: upto + 1]):
        earlier = {r[1] for r in records}
        records.extend(_prompt_record(run, prompts))
        pending = open_chunk(conversation, index)
        phases = [s for s in run.segments if isinstance(s, Reasoning)]
        for segment in run.segments:
            if isinstance(segment, Group):
                records.extend(_group_records(run, segment, pending, earlier))
            elif isinstance(segment, Reasoning):
                # a phase whose end never came is ended by the next phase's start
                ended = segment.ended or segment is not phases[-1]
                records.append(_reasoning_record(run, segment, ended))
    return records


def _prompt_record(run: Run, prompts: dict[str, str]) -> list[tuple[Any, ...]]:
    held = [i for i, c in prompts.items() if i.split("#")[0] == run.prompt_id]
    if any(prompts[i] == run.prompt for i in held):
        return []  # the same id with the same content: a no-op
    stored = run.prompt_id if not held else f"{run.prompt_id}#{len(held) + 1}"
    prompts[stored] = run.prompt
    return [("user", stored, run.prompt, "complete", None, [], [])]


def started_calls(text: Text) -> list[Call]:
    """The text's calls in the order their first events arrive (events form, then chunks)."""
    return [c for c in text.calls if not c.chunked] + [c for c in text.calls if c.chunked]


def _ended(record: Text | Call, pending: str | None) -> bool:
    if record.chunked:  # chunks have no END: the next event of another kind ends them
        return record.id != pending
    return record.ended


def _group_records(
    run: Run, group: Group, pending: str | None, earlier: set[str | None]
) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    target = _snapshot_target(run)
    for text in group.texts:
        content = text.text
        if target is text:
            snap = _snapshot_text(run, text)
            if snap != content and snap.startswith(content):  # the stream was cut short
                content = snap
        calls = [
            (c.id, c.name, c.arguments, status_at_end(run, _ended(c, pending)))
            for c in started_calls(text)
        ]
        if text.silent:  # the message the fold opened for its calls ends with them
            ended = all(_ended(c, pending) for c in text.calls)
        else:
            ended = _ended(text, pending)
        status = status_at_end(run, ended)
        out.append(("assistant", text.id, content, status, None, calls, []))
    answered = [c for t in group.texts for c in t.calls if c.result is not None]
    for i in group.result_order:
        call = answered[i]
        assert call.result is not None
        result_id: str | None = call.result.message_id or f"result:{call.id}"
        if result_id in earlier:  # call_0 answered in an earlier run: the id moves to metadata
            result_id = None
        out.append(("tool", result_id, call.result.content, "complete", call.id, [], []))
    return out


def _reasoning_record(run: Run, r: Reasoning, ended: bool) -> tuple[Any, ...]:
    agui_id = None if r.thinking else r.id
    status = status_at_end(run, ended)
    return ("reasoning", agui_id, "", status, None, [], [(r.text, r.encrypted)])
