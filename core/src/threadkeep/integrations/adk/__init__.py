"""Google ADK sessions on threadkeep: ``ThreadkeepSessionService``.

Install with ``pip install 'threadkeep[adk]'``; then::

    from threadkeep.integrations.adk import ThreadkeepSessionService

    runner = Runner(
        agent=agent,
        app_name="my_app",
        session_service=ThreadkeepSessionService("sqlite+aiosqlite:///./chats.db"),
    )

See ``docs/integrations.md`` for what maps to what and where app and user state live.
"""

from .._requires import require_framework

require_framework("google.adk", "Google ADK", "adk")

from ._convert import METADATA_KEY, event_to_message, message_to_event  # noqa: E402
from ._service import ThreadkeepSessionService  # noqa: E402

__all__ = ["METADATA_KEY", "ThreadkeepSessionService", "event_to_message", "message_to_event"]
