"""The history routes: its three paged reads and the writes a chat UI needs.

Every read returns a page, never the whole thread: ``limit`` defaults to 50 and is capped
at 200, ``cursor`` walks to older items and
must be one this API issued (else 400 ``invalid_cursor``), answers are
``{items, nextCursor, hasMore}`` with items oldest to newest. ``{thread_id}`` is a thread's
``threadId`` (its chat id).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request

from .._paging import DEFAULT_PAGE_LIMIT, ChatFilter
from ._access import (
    authenticated,
    deleted_thread,
    store_of,
    team_viewer,
    visible_thread,
)
from ._auth import Principal
from ._errors import ERROR_RESPONSES, ApiError
from ._wire import (
    CancelOut,
    MessageItem,
    PageOut,
    RenameBody,
    RunItem,
    StartOverOut,
    ThreadItem,
    ThreadOut,
    page_out,
)

__all__ = ["router"]

router = APIRouter(prefix="/agents/{agent_id}/chat", responses=ERROR_RESPONSES)

AgentId = Annotated[str, Path(min_length=1, max_length=1000, description="The agent's id.")]
ThreadId = Annotated[str, Path(description="A thread's threadId (from the threads list).")]
Limit = Annotated[
    int,
    Query(ge=1, description="Items per page: default 50, above 200 means 200."),
]
Cursor = Annotated[
    str | None,
    Query(max_length=4096, description="nextCursor of the previous page (walks to older)."),
]
Caller = Annotated[Principal, Depends(authenticated)]


@router.get("/messages", response_model=PageOut[MessageItem], tags=["history"])
async def own_thread_messages(
    request: Request,
    *,
    agent_id: AgentId,
    caller: Caller,
    channel: Annotated[str | None, Query(max_length=1000)] = None,
    limit: Limit = DEFAULT_PAGE_LIMIT,
    cursor: Cursor = None,
) -> PageOut[MessageItem]:
    """A page of the caller's own thread with the agent (on ``channel``, if given).

    The caller's newest thread with the agent is read; with none yet, the page is empty.
    """
    store = store_of(request)
    viewer = team_viewer(caller, None)
    own = ChatFilter(
        user_id=caller.user_id,
        agent_id=agent_id,
        channel=channel,
        tenant_id=caller.tenant_id,
        visible_to=viewer,
    )
    newest = await store.list_chats(own, limit=1)
    if not newest.items:
        if cursor is not None:  # no thread yet, so no cursor of it was ever issued
            raise ApiError(400, "invalid_cursor", "this cursor was not issued for this thread")
        return PageOut[MessageItem](items=[], next_cursor=None, has_more=False)
    chat = newest.items[-1]
    page = await store.list_messages(chat.chat_id, limit=limit, cursor=cursor, viewer=viewer)
    return page_out(page, MessageItem.of)


@router.get("/threads", response_model=PageOut[ThreadItem], tags=["history"])
async def threads(
    request: Request,
    *,
    agent_id: AgentId,
    caller: Caller,
    team: Annotated[
        str | None, Query(description="Which of your teams' shared threads to include.")
    ] = None,
    limit: Limit = DEFAULT_PAGE_LIMIT,
    cursor: Cursor = None,
) -> PageOut[ThreadItem]:
    """A page of the threads with the agent the caller sees, newest created first.

    The caller's own threads and those shared with ``team`` (default: the caller's first
    team), in the caller's tenant.
    """
    store = store_of(request)
    viewer = team_viewer(caller, team)
    visible = ChatFilter(agent_id=agent_id, tenant_id=caller.tenant_id, visible_to=viewer)
    page = await store.list_chats(visible, limit=limit, cursor=cursor)
    return page_out(page, ThreadItem.of)


@router.get("/threads/{thread_id}/messages", response_model=PageOut[MessageItem], tags=["history"])
async def thread_messages(
    request: Request,
    *,
    agent_id: AgentId,
    thread_id: ThreadId,
    caller: Caller,
    limit: Limit = DEFAULT_PAGE_LIMIT,
    cursor: Cursor = None,
) -> PageOut[MessageItem]:
    """A page of one thread's messages, boundaries ("start over", compaction) included."""
    store = store_of(request)
    chat, viewer = await visible_thread(store, caller, agent_id, thread_id)
    page = await store.list_messages(chat.chat_id, limit=limit, cursor=cursor, viewer=viewer)
    return page_out(page, MessageItem.of)


@router.get("/threads/{thread_id}", response_model=ThreadOut, tags=["threads"])
async def thread(
    request: Request, *, agent_id: AgentId, thread_id: ThreadId, caller: Caller
) -> ThreadOut:
    """One thread the caller sees."""
    chat, _ = await visible_thread(store_of(request), caller, agent_id, thread_id)
    return ThreadOut(item=ThreadItem.of(chat))


@router.get("/threads/{thread_id}/runs/{run_id}", response_model=RunItem, tags=["threads"])
async def run_outcome(
    request: Request,
    *,
    agent_id: AgentId,
    thread_id: ThreadId,
    run_id: Annotated[str, Path(min_length=1)],
    caller: Caller,
) -> RunItem:
    """A run's outcome (``active``, ``complete``, ``interrupted``, ``errored``)."""
    store = store_of(request)
    chat, _ = await visible_thread(store, caller, agent_id, thread_id)
    return RunItem.of(await store.get_run(chat.chat_id, run_id))


@router.post(
    "/threads/{thread_id}/runs/{run_id}/cancel", response_model=CancelOut, tags=["threads"]
)
async def cancel_run(
    request: Request,
    *,
    agent_id: AgentId,
    thread_id: ThreadId,
    run_id: Annotated[str, Path(min_length=1)],
    caller: Caller,
) -> CancelOut:
    """Stop a run this server executes for the caller (records end ``interrupted``).

    The text already delivered is kept; ``cancelled`` is false if the caller has no such
    run executing on this server.
    """
    chat, _ = await visible_thread(store_of(request), caller, agent_id, thread_id)
    cancelled = request.app.state.threadkeep_runs.cancel(caller, chat.thread_id, run_id)
    return CancelOut(cancelled=cancelled)


@router.post("/threads/{thread_id}/start-over", response_model=StartOverOut, tags=["threads"])
async def start_over(
    request: Request, *, agent_id: AgentId, thread_id: ThreadId, caller: Caller
) -> StartOverOut:
    """Draw a "start over" line; idempotent (twice draws one line; none in an empty thread)."""
    store = store_of(request)
    chat, _ = await visible_thread(store, caller, agent_id, thread_id)
    line = await store.start_over(chat.chat_id)
    return StartOverOut(item=None if line is None else MessageItem.of(line))


@router.patch("/threads/{thread_id}", response_model=ThreadOut, tags=["threads"])
async def rename(
    request: Request, *, agent_id: AgentId, thread_id: ThreadId, body: RenameBody, caller: Caller
) -> ThreadOut:
    """Rename a thread (``{"name": "..."}``; ``null`` clears the name)."""
    store = store_of(request)
    chat, _ = await visible_thread(store, caller, agent_id, thread_id)
    return ThreadOut(item=ThreadItem.of(await store.rename_chat(chat.chat_id, body.name)))


@router.delete("/threads/{thread_id}", response_model=ThreadOut, tags=["threads"])
async def delete(
    request: Request, *, agent_id: AgentId, thread_id: ThreadId, caller: Caller
) -> ThreadOut:
    """Soft-delete a thread: it leaves every read until restored (or purged)."""
    store = store_of(request)
    chat, _ = await visible_thread(store, caller, agent_id, thread_id)
    return ThreadOut(item=ThreadItem.of(await store.delete_chat(chat.chat_id)))


@router.post("/threads/{thread_id}/restore", response_model=ThreadOut, tags=["threads"])
async def restore(
    request: Request, *, agent_id: AgentId, thread_id: ThreadId, caller: Caller
) -> ThreadOut:
    """Bring back a deleted thread (a live one is returned as it is; archived is rehydrated)."""
    store = store_of(request)
    try:
        chat, _ = await visible_thread(store, caller, agent_id, thread_id)
    except ApiError:  # not live: look among the caller's deleted threads
        chat = await deleted_thread(store, caller, agent_id, thread_id)
    return ThreadOut(item=ThreadItem.of(await store.restore_chat(chat.chat_id)))
