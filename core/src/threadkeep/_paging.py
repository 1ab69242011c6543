"""Pages and the filters they are bound to."""

from __future__ import annotations

from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ._corrupt import CorruptRow
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
"""Larger limits are capped to this: a read returns a page, never a whole thread."""

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
    corrupt: list[CorruptRow] = Field(default_factory=list)
    """Damaged rows this page left out (only on a ``corrupt_records="skip"`` store)."""


class Viewer(BaseModel):
    """Who is asking, for the access-checked reads.

    A chat is visible to a viewer when it is in the viewer's tenant and either the viewer
    owns it or it is shared with the viewer's team. Given to ``get_chat``,
    ``list_messages`` (``viewer=``) and ``ChatFilter.visible_to``; a mapping of these
    fields is accepted there too. An unknown field (a typo such as ``tenant``) is refused
    (``InvalidArgument``), never ignored: ignored, it would widen what the viewer sees.

    Attributes:
        user_id: The person asking (non-empty); they see the chats whose ``user_id`` is
            theirs.
        team_id: The person's team, or ``None`` for none; they also see chats with
            ``share == "team"`` and this ``team_id``.
        tenant_id: The person's tenant, or ``None``. Tenants never mix: the viewer sees
            only chats whose ``tenant_id`` equals this one exactly, and ``None`` is a
            tenant of its own (a viewer without a tenant sees only chats without one).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    user_id: str = Field(min_length=1)
    team_id: str | None = None
    tenant_id: str | None = None


class ChatFilter(BaseModel):
    """Which chats ``list_chats`` returns.

    Every given field must match (``None`` means "any"); ``list_chats`` also accepts a
    mapping of these fields.

    Attributes:
        user_id: The owner.
        tenant_id: The tenant (filters never return another tenant's chats).
        team_id: The chat's team.
        agent_id: The agent the chat talks to.
        channel: Where the chat happens.
        status: ``active`` (hot) or ``archived``.
        keyword: A case-insensitive substring of ``name``.
        visible_to: Keep chats the :class:`Viewer` may see: in the viewer's tenant
            (``None`` only with ``None``), owned by the viewer or shared with the viewer's
            team.
        deleted: Which chats by deletion: ``"exclude"`` (default: live chats only),
            ``"include"`` (both: live and soft-deleted chats together, as ``erase_user``
            reads them) or ``"only"`` (soft-deleted chats only, as ``purge`` reads them).
        idle_before: Keep chats whose last message (or creation, if none) is older than
            this instant (timezone-aware).
        deleted_before: Keep chats soft-deleted before this instant (timezone-aware).
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
    """Which messages ``list_messages`` returns.

    Every given field must match (``None`` means "any"); ``roles`` and ``kinds`` match any
    listed value. ``list_messages`` also accepts a mapping of these fields, for example
    ``{"roles": ["user"]}``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    roles: frozenset[Role] | None = None
    kinds: frozenset[MessageKind] | None = None
    run_id: str | None = None
    request_id: str | None = None
    block_id: str | None = None
