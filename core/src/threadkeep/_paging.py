"""Pages and the filters they are bound to (SPEC section 3, "Pages")."""

from __future__ import annotations

from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ._models import ChatStatus, MessageKind, Role, UTCDateTime

__all__ = [
    "DEFAULT_PAGE_LIMIT",
    "MAX_PAGE_LIMIT",
    "ChatFilter",
    "MessageFilter",
    "Page",
    "Viewer",
]

DEFAULT_PAGE_LIMIT = 50
"""Items per page when ``limit`` is not given."""

MAX_PAGE_LIMIT = 200
"""Larger limits are capped to this (agent-chat-storage seed, "Reads")."""

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a keyset walk.

    ``items`` run oldest to newest inside the page; the first page is the newest.
    ``next_cursor`` walks to older items and is ``None`` exactly when ``has_more`` is false;
    ``has_more`` is computed by looking one item past the page, never inferred from the
    number of items.
    """

    items: list[T]
    next_cursor: str | None = None
    has_more: bool = False


class Viewer(BaseModel):
    """Who is asking: a chat is visible to its owner, and to its team when shared."""

    model_config = ConfigDict(frozen=True)

    user_id: str = Field(min_length=1)
    team_id: str | None = None
    tenant_id: str | None = None


class ChatFilter(BaseModel):
    """Which chats ``list_chats`` returns (the Yao seed's ``ChatFilter``, extended).

    Every given field must match. ``keyword`` is a case-insensitive substring of ``name``.
    ``visible_to`` keeps chats the viewer owns or that are shared with the viewer's team, in
    the viewer's tenant. ``deleted`` selects live chats (default), both, or only deleted ones.
    ``idle_before`` keeps chats whose last message (or creation, if none) is older;
    ``deleted_before`` keeps chats deleted before that instant.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    user_id: str | None = None
    tenant_id: str | None = None
    team_id: str | None = None
    agent_id: str | None = None
    channel: str | None = None
    status: ChatStatus | None = None
    keyword: str | None = None
    visible_to: Viewer | None = None
    deleted: Literal["exclude", "include", "only"] = "exclude"
    idle_before: UTCDateTime | None = None
    deleted_before: UTCDateTime | None = None


class MessageFilter(BaseModel):
    """Which messages ``list_messages`` returns (the Yao seed's ``MessageFilter``).

    Every given field must match; ``roles`` and ``kinds`` match any listed value.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    roles: frozenset[Role] | None = None
    kinds: frozenset[MessageKind] | None = None
    run_id: str | None = None
    request_id: str | None = None
    block_id: str | None = None
