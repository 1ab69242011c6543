"""threadkeep.sync: the blocking API, for scripts and for agent frameworks' sync methods.

The same methods as the async :class:`threadkeep.Store`, without ``await`` (the pair of
httpx's ``Client`` and ``AsyncClient``)::

    from threadkeep.sync import open_store

    with open_store("sqlite+aiosqlite:///./threadkeep.db") as store:
        chat = store.create_chat("user-1", "thread-1")
        store.append_message(chat.chat_id, {"role": "user", "content": "hi"})

Each sync store runs its async store on a private event loop thread, so it is safe to call
from any thread, including one whose own event loop is running.
"""

from ._portal import BlockingCallOnLoopThread, OpenTimeout
from ._store import DEFAULT_OPEN_TIMEOUT, SyncStore, open_store

__all__ = [
    "DEFAULT_OPEN_TIMEOUT",
    "BlockingCallOnLoopThread",
    "OpenTimeout",
    "SyncStore",
    "open_store",
]
