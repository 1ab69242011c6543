"""LangChain's chat message history on threadkeep: ``ThreadkeepChatMessageHistory``.

Install with ``pip install 'threadkeep[langchain]'``; then::

    from threadkeep.integrations.langchain import ThreadkeepChatMessageHistory

    def get_session_history(session_id: str) -> ThreadkeepChatMessageHistory:
        return ThreadkeepChatMessageHistory(session_id, store="sqlite+aiosqlite:///./chats.db")

    chain = RunnableWithMessageHistory(model, get_session_history)

See ``docs/integrations.md`` for what maps to what.
"""

from .._requires import require_framework

require_framework("langchain_core", "LangChain (langchain-core)", "langchain")

from ._convert import METADATA_KEY, from_threadkeep, to_threadkeep  # noqa: E402
from ._history import ThreadkeepChatMessageHistory  # noqa: E402

__all__ = ["METADATA_KEY", "ThreadkeepChatMessageHistory", "from_threadkeep", "to_threadkeep"]
