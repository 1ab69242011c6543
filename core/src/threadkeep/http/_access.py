"""Access control: the store is only ever asked with the caller's ``Viewer``.

A principal sees its own chats and the chats shared with one of its teams, in its tenant;
a thread of another agent, tenant or person is
answered exactly as an unknown id: ``404 not_found`` (issue 17).
"""

from __future__ import annotations

from uuid import UUID

from fastapi import Request

from .._errors import ChatNotFound
from .._models import Chat
from .._paging import MAX_PAGE_LIMIT, ChatFilter, Viewer
from .._store import Store
from ._auth import Authenticator, Principal
from ._errors import ApiError

__all__ = [
    "authenticated",
    "deleted_thread",
    "not_found",
    "store_of",
    "team_viewer",
    "visible_thread",
]


def not_found() -> ApiError:
    """Return the one answer for an unknown or foreign id (never 403)."""
    return ApiError(404, "not_found", "no such thread, message or run")


def store_of(request: Request) -> Store:
    """Return the store the app serves (``app.state.threadkeep_store``).

    Raises:
        ApiError: 503 ``store_not_open`` if the app's store is not open yet (a mounted
            app whose parent did not run its lifespan and gave it no store).
    """
    store: Store | None = getattr(request.app.state, "threadkeep_store", None)
    if store is None or not store.is_open:
        raise ApiError(503, "store_not_open", "the gateway's store is not open")
    return store


async def authenticated(request: Request) -> Principal:
    """FastAPI dependency: the request's principal.

    Raises:
        ApiError: 401 ``unauthorized`` if the request carries no valid credentials.
    """
    authenticator: Authenticator = request.app.state.threadkeep_authenticator
    try:
        principal = await authenticator(request)
    except ValueError as exc:  # InvalidArgument: malformed, expired or foreign credentials
        raise ApiError(401, "unauthorized", str(exc)) from exc
    if principal is None:
        raise ApiError(401, "unauthorized", "send Authorization: Bearer <token>")
    return principal


def team_viewer(principal: Principal, team: str | None) -> Viewer:
    """Return the principal's viewer acting for ``team`` (default: its first team).

    Raises:
        ApiError: 400 ``invalid_argument`` if ``team`` is not one of the principal's teams.
    """
    viewers = principal.viewers()
    if team is None:
        return viewers[0]
    for viewer in viewers:
        if viewer.team_id == team:
            return viewer
    raise ApiError(400, "invalid_argument", f"team {team!r} is not one of your teams")


async def visible_thread(
    store: Store, principal: Principal, agent_id: str, thread_id: str
) -> tuple[Chat, Viewer]:
    """Return the live chat ``thread_id`` of ``agent_id`` and the viewer that sees it.

    Raises:
        ApiError: 404 ``not_found`` if the id is not a chat id, or the chat is deleted,
            of another agent, or not visible to any of the principal's viewers.
    """
    chat_id = _chat_id(thread_id)
    for viewer in principal.viewers():
        try:
            chat = await store.get_chat(chat_id, viewer=viewer)
        except ChatNotFound:
            continue
        if chat.agent_id != agent_id:
            break
        return chat, viewer
    raise not_found()


async def deleted_thread(store: Store, principal: Principal, agent_id: str, thread_id: str) -> Chat:
    """Return the soft-deleted chat ``thread_id`` of ``agent_id`` the principal may see.

    Walks the principal's deleted chats of that agent (keyset pages of 200), so it costs
    one query per 200 deleted chats the principal can see.

    Raises:
        ApiError: 404 ``not_found`` if there is no such deleted chat visible to it.
    """
    chat_id = _chat_id(thread_id)
    for viewer in principal.viewers():
        chat_filter = ChatFilter(
            agent_id=agent_id, tenant_id=principal.tenant_id, visible_to=viewer, deleted="only"
        )
        cursor: str | None = None
        while True:
            page = await store.list_chats(chat_filter, limit=MAX_PAGE_LIMIT, cursor=cursor)
            for chat in page.items:
                if chat.chat_id == chat_id:
                    return chat
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
    raise not_found()


def _chat_id(thread_id: str) -> UUID:
    try:
        return UUID(thread_id)
    except ValueError:
        raise not_found() from None
