"""The HTTP gateway: paged chat history per agent and thread, behind authentication.

Install with ``pip install "threadkeep[http]"`` (FastAPI, uvicorn, PyJWT)::

    from threadkeep.http import JWTAuthenticator, create_app

    app = create_app(
        url="postgresql+asyncpg://...",
        authenticator=JWTAuthenticator(jwks_url="https://idp.example/.well-known/jwks.json",
                                       issuer="https://idp.example/", audience="chat"),
    )
    # uvicorn module:app, or mount it into your service with an open store (store=...)

Routes (the storage design, ``agent-chat-storage``), under ``/agents/{agent_id}/chat``:
``GET /messages``, ``GET /threads``, ``GET /threads/{thread_id}/messages`` (each
``?limit=&cursor=``, answering ``{items, nextCursor, hasMore}``), start-over, rename, delete
and restore of a thread, a run's outcome, the AG-UI run endpoint (SSE) and the history viewer
at ``/viewer/``. See ``docs/http.md``.

This package is imported only when used (``import threadkeep`` does not load FastAPI).
"""

try:
    import fastapi  # noqa: F401
    import jwt  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    msg = 'threadkeep.http needs the http extra: pip install "threadkeep[http]"'
    raise ImportError(msg) from exc

from ._app import create_app
from ._auth import JWT_SECRET_ENV, Authenticator, JWTAuthenticator, Principal, bearer_token
from ._errors import ApiError
from ._runs import AgentLookup
from ._wire import (
    ErrorBody,
    MessageItem,
    PageOut,
    ReasoningItem,
    RunItem,
    ThreadItem,
    ToolCallItem,
)

__all__ = [
    "JWT_SECRET_ENV",
    "AgentLookup",
    "ApiError",
    "Authenticator",
    "ErrorBody",
    "JWTAuthenticator",
    "MessageItem",
    "PageOut",
    "Principal",
    "ReasoningItem",
    "RunItem",
    "ThreadItem",
    "ToolCallItem",
    "bearer_token",
    "create_app",
]
