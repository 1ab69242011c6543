"""Pydantic AI conversations on threadkeep: a ``ConversationStore`` and a message history.

Install with ``pip install 'threadkeep[pydantic-ai]'``; then::

    from threadkeep.integrations.pydantic_ai import ThreadkeepMessageHistory

    history = ThreadkeepMessageHistory("conv-1", store="sqlite+aiosqlite:///./chats.db")
    result = await agent.run("hello", message_history=await history.load())
    await history.save(result.new_messages())

or, with Pydantic AI's own ``ConversationStore`` interface (records, branches, forks)::

    from threadkeep.integrations.pydantic_ai import ThreadkeepConversationStore

    store = ThreadkeepConversationStore("sqlite+aiosqlite:///./chats.db")
    conversation = await store.load(cid) or Conversation(conversation_id=cid)
    await store.save(await agent.run("hello", conversation=conversation))

See ``docs/integrations.md`` for what maps to what.
"""

from .._requires import require_framework

require_framework("pydantic_ai", "Pydantic AI", "pydantic-ai")

from ._convert import METADATA_KEY, from_threadkeep, to_threadkeep  # noqa: E402
from ._history import ThreadkeepMessageHistory  # noqa: E402
from ._store import ThreadkeepConversationStore  # noqa: E402

__all__ = [
    "METADATA_KEY",
    "ThreadkeepConversationStore",
    "ThreadkeepMessageHistory",
    "from_threadkeep",
    "to_threadkeep",
]
