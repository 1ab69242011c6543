"""The OpenAI Agents SDK's ``Session`` on threadkeep: ``ThreadkeepSession``.

Install with ``pip install 'threadkeep[openai-agents]'``; then::

    from threadkeep.integrations.openai_agents import ThreadkeepSession

    session = ThreadkeepSession("conversation-1", store="sqlite+aiosqlite:///./chats.db")
    result = await Runner.run(agent, "hello", session=session)

See ``docs/integrations.md`` for what maps to what.
"""

from .._requires import require_framework

require_framework("agents", "the OpenAI Agents SDK", "openai-agents")

from ._items import METADATA_KEY, item_to_message, message_to_items  # noqa: E402
from ._session import ThreadkeepSession  # noqa: E402

__all__ = ["METADATA_KEY", "ThreadkeepSession", "item_to_message", "message_to_items"]
