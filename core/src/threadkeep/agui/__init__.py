"""AG-UI run persistence: wrap an agent, and every run's event stream becomes durable history.

Install with ``pip install threadkeep[agui]`` (on the ``ag-ui-protocol`` event models)::

    from threadkeep import open_store
    from threadkeep.agui import RunManager, StorageAgent

    store = await open_store("sqlite+aiosqlite:///./threadkeep.db").open()
    manager = RunManager(lambda: StorageAgent(my_agent, store, user_id="u1"))
    handle = await manager.run(run_agent_input)
    async for event in handle.events():     # forward to the client as SSE
        ...
    await handle.wait()                      # every record is stored

- :class:`StorageAgent` forwards the inner agent's events verbatim while a background task
  folds them into messages, nested tool calls and reasonings (``write_policy`` incremental or
  buffered, ``on_error`` keep or discard), and records the run's lease and steps.
- :class:`RunManager` / :class:`RunHandle`: disconnect survival, ``cancel()``, ``wait()``,
  ``resume()``.
- :func:`current_run` gives an agent its :class:`RunContext` to record steps and
  skip steps a resumed run completed before.

See ``docs/run-persistence.md``.
"""

from ._agent import AGUIAgent, OnError, ResumeState, StorageAgent
from ._compat import (
    THINKING_EVENTS,
    ThinkingContentEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ThinkingTextMessageContentEvent,
    ThinkingTextMessageEndEvent,
    ThinkingTextMessageStartEvent,
    UnknownEvent,
)
from ._fold import AGUI_STEP_TYPE, EventFolder
from ._jsonpatch import apply_patch
from ._manager import AgentFactory, RunHandle, RunManager
from ._state import SURROGATES_NOTE, FoldState, Record
from ._steps import NoActiveRun, RunContext, StepHandle, current_run
from ._text import TextBuffer, repair_surrogates
from ._translate import (
    ACTIVITY_PART,
    AguiMessage,
    agui_id_of,
    message_from_agui,
    parts_from_agui,
    translate_messages,
)
from ._wire import EVENT_CLASSES, ParsedStream, parse_event, read_event_text
from ._writers import BufferedWriter, IncrementalWriter, RunWriter, WritePolicy

__all__ = [
    "ACTIVITY_PART",
    "AGUI_STEP_TYPE",
    "EVENT_CLASSES",
    "SURROGATES_NOTE",
    "THINKING_EVENTS",
    "AGUIAgent",
    "AgentFactory",
    "AguiMessage",
    "BufferedWriter",
    "EventFolder",
    "FoldState",
    "IncrementalWriter",
    "NoActiveRun",
    "OnError",
    "ParsedStream",
    "Record",
    "ResumeState",
    "RunContext",
    "RunHandle",
    "RunManager",
    "RunWriter",
    "StepHandle",
    "StorageAgent",
    "TextBuffer",
    "ThinkingContentEvent",
    "ThinkingEndEvent",
    "ThinkingStartEvent",
    "ThinkingTextMessageContentEvent",
    "ThinkingTextMessageEndEvent",
    "ThinkingTextMessageStartEvent",
    "UnknownEvent",
    "WritePolicy",
    "agui_id_of",
    "apply_patch",
    "current_run",
    "message_from_agui",
    "parse_event",
    "parts_from_agui",
    "read_event_text",
    "repair_surrogates",
    "translate_messages",
]
