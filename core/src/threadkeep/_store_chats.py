"""Chat operations of ``Store``: create, read, update, delete, restore, list, purge, erase."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from itertools import repeat
from typing import Any, TypeVar
from uuid import UUID

from pydantic import BaseModel, Field

from ._content import validate_model
from ._corrupt import CorruptRow, collecting, window
from ._errors import CapabilityNotSupported, ChatNotFound, Conflict, InvalidArgument
from ._models import Chat, ChatStatus, Message, Share
from ._paging import DEFAULT_PAGE_LIMIT, ChatFilter, Page, Viewer
from ._rows import built
from ._store_args import CHAT_KEYS, as_aware, as_id, as_key, as_model, check_chat_keys
from ._store_core import Component

__all__ = ["ChatOps", "ErasureReceipt", "chat_visible_to", "page_of"]

_MUTABLE_CHAT_FIELDS = frozenset({"name", "agent_id", "channel", "team_id", "share", "metadata"})
_CAS_ATTEMPTS = 16


class ErasureReceipt(BaseModel):
    """What ``erase_user`` removed: counts per store, then per kind of record.

    ``stores`` always holds ``"hot"`` (the store's own records: ``chats``, ``messages``, and
    ``steps``/``runs``/index records where the driver keeps them) and ``"archive"``
    (``bundles`` deleted, and the ``messages`` and ``steps`` that existed only in them), with
    zeros for a person who had nothing. Each record is counted once: a bundle of a chat
    that was rehydrated holds copies of hot rows, so its rows count under ``"hot"`` only.

    Example: ``{"hot": {"chats": 2, "messages": 40, "steps": 3}, "archive": {"bundles": 1,
    "messages": 12, "steps": 0}}``.
    """

    user_id: str
    stores: dict[str, dict[str, int]] = Field(default_factory=dict)

    def add(self, store: str, counts: dict[str, int]) -> None:
        """Add ``counts`` (record kind -> count) to the totals of ``store``."""
        totals = self.stores.setdefault(store, {})
        for kind, count in counts.items():
            totals[kind] = totals.get(kind, 0) + count


M = TypeVar("M", bound=BaseModel)


def page_of(
    model: type[M],
    items: list[M],
    next_cursor: str | None,
    has_more: bool,
    corrupt: list[CorruptRow] | None = None,
) -> Page[M]:
    """Return ``Page[model]`` of ``items`` (already instances: built without re-checking them).

    ``corrupt`` lists the damaged rows a ``corrupt_records="skip"`` read left out.

    Validating the page would only check each item's class (``revalidate_instances`` is
    ``never``), so when they all are ``model`` instances the page is assembled directly;
    anything else is validated as before.
    """
    page_type = _PAGE_TYPES.get(model)
    if page_type is None:
        page_type = _PAGE_TYPES[model] = Page[model]  # type: ignore[valid-type]
    extra = {"corrupt": corrupt} if corrupt else {}
    if all(map(isinstance, items, repeat(model))):
        values: dict[str, Any] = {
            "items": items,
            "next_cursor": next_cursor,
            "has_more": has_more,
            "corrupt": corrupt or [],
        }
        return built(page_type, values)
    return page_type(items=items, next_cursor=next_cursor, has_more=has_more, **extra)


_PAGE_TYPES: dict[type[BaseModel], type[Page[Any]]] = {}


def _seq(record: Chat | Message) -> int | None:
    return record.seq


def chat_visible_to(chat: Chat, viewer: Viewer) -> bool:
    """Return whether ``viewer`` may see ``chat``.

    The chat must be in the viewer's tenant: ``chat.tenant_id == viewer.tenant_id``, where
    ``None`` is a tenant of its own (a viewer without a tenant sees only chats without
    one). Within it, the viewer sees chats it owns, and chats shared with its team
    (``share == "team"`` and the same non-``None`` ``team_id``). Drivers that translate
    ``ChatFilter.visible_to`` into a native query must select exactly this.
    """
    if chat.tenant_id != viewer.tenant_id:
        return False
    if chat.user_id == viewer.user_id:
        return True
    return (
        chat.share is Share.TEAM and viewer.team_id is not None and chat.team_id == viewer.team_id
    )


class ChatOps(Component):
    """Chat operations: create or find by identity, list, update, delete, tenancy checks."""

    async def create_chat(
        self,
        user_id: str,
        thread_id: str,
        *,
        agent_id: str | None = None,
        channel: str | None = None,
        tenant_id: str | None = None,
        team_id: str | None = None,
        name: str | None = None,
        share: Share = Share.PRIVATE,
        metadata: dict[str, Any] | None = None,
    ) -> Chat:
        """Implement :meth:`threadkeep.Store.create_chat`."""
        self._ctx.require_open()
        now = self._ctx.now()
        chat = validate_model(
            self._ctx.records.chat_model,
            {
                "user_id": as_key(user_id, "user_id"),
                "thread_id": as_key(thread_id, "thread_id"),
                **check_chat_keys(
                    agent_id=agent_id,
                    channel=channel,
                    tenant_id=tenant_id,
                    team_id=team_id,
                    name=name,
                ),
                "share": share,
                "metadata": {} if metadata is None else metadata,
                "created_at": now,
                "updated_at": now,
            },
        )
        self._ctx.records.record_body(chat)
        return await self._driver.insert_chat(chat)

    async def get_chat(
        self,
        chat_id: UUID | str,
        *,
        viewer: Viewer | Mapping[str, Any] | None = None,
        include_deleted: bool = False,
    ) -> Chat:
        """Implement :meth:`threadkeep.Store.get_chat`."""
        self._ctx.require_open()
        chat_id = as_id(chat_id, "chat_id")
        seen_by = None if viewer is None else as_model(Viewer, viewer, "viewer")
        if not isinstance(include_deleted, bool):
            raise InvalidArgument(f"include_deleted must be a bool, not {include_deleted!r}")
        chat = await self._driver.get_chat(chat_id)
        if chat is None or (chat.deleted_at is not None and not include_deleted):
            raise ChatNotFound(f"no live chat {chat_id}")
        if seen_by is not None and not chat_visible_to(chat, seen_by):
            raise ChatNotFound(f"no live chat {chat_id} visible to user {seen_by.user_id!r}")
        return chat

    async def find_chat(
        self, user_id: str, thread_id: str, *, tenant_id: str | None = None
    ) -> Chat | None:
        """Implement :meth:`threadkeep.Store.find_chat`."""
        self._ctx.require_open()
        user_id, thread_id = as_key(user_id, "user_id"), as_key(thread_id, "thread_id")
        if tenant_id is None:
            return await self._driver.find_live_chat(user_id, thread_id)
        return await self._driver.find_live_chat(
            user_id, thread_id, tenant_id=as_key(tenant_id, "tenant_id")
        )

    async def update_chat(self, chat_id: UUID | str, /, **changes: Any) -> Chat:
        """Implement :meth:`threadkeep.Store.update_chat`."""
        chat_id = as_id(chat_id, "chat_id")
        unknown = set(changes) - _MUTABLE_CHAT_FIELDS
        if unknown:
            msg = f"cannot change {sorted(unknown)}; changeable: {sorted(_MUTABLE_CHAT_FIELDS)}"
            raise InvalidArgument(msg)
        changes.update(check_chat_keys(**{k: v for k, v in changes.items() if k in CHAT_KEYS}))
        return await self._rewrite_chat(chat_id, changes, live=True)

    async def rename_chat(self, chat_id: UUID | str, name: str | None) -> Chat:
        """Implement :meth:`threadkeep.Store.rename_chat`."""
        return await self.update_chat(chat_id, name=name)

    async def delete_chat(self, chat_id: UUID | str) -> Chat:
        """Implement :meth:`threadkeep.Store.delete_chat`."""
        chat_id = as_id(chat_id, "chat_id")
        return await self._rewrite_chat(chat_id, {"deleted_at": self._ctx.now()}, live=True)

    async def restore_chat(self, chat_id: UUID | str) -> Chat:
        """Implement :meth:`threadkeep.Store.restore_chat`."""
        self._ctx.require_open()
        chat_id = as_id(chat_id, "chat_id")
        chat = await self._driver.get_chat(chat_id)
        if chat is None:
            raise ChatNotFound(f"no chat {chat_id}")
        if chat.deleted_at is not None:
            chat = await self._rewrite_chat(chat_id, {"deleted_at": None}, live=False)
        if chat.status is ChatStatus.ARCHIVED:
            chat = await self._rehydrate(chat)
        return chat

    async def _rewrite_chat(self, chat_id: UUID, changes: dict[str, Any], *, live: bool) -> Chat:
        self._ctx.require_open()
        for _ in range(_CAS_ATTEMPTS):
            chat = await self._driver.get_chat(chat_id)
            if chat is None or (live and chat.deleted_at is not None):
                raise ChatNotFound(f"no live chat {chat_id}")
            data = {**chat.model_dump(), **changes, "updated_at": self._ctx.now()}
            updated = validate_model(self._ctx.records.chat_model, data)
            self._ctx.records.record_body(updated)
            stored = await self._driver.update_chat(updated, chat.revision)
            if stored is not None:
                return stored
        raise Conflict(f"chat {chat_id} kept changing; try again")

    async def list_chats(
        self,
        chat_filter: ChatFilter | Mapping[str, Any] | None = None,
        *,
        limit: int = DEFAULT_PAGE_LIMIT,
        cursor: str | None = None,
    ) -> Page[Chat]:
        """Implement :meth:`threadkeep.Store.list_chats`."""
        chat_filter, size, scope, before = self._ctx.chat_page_start(chat_filter, limit, cursor)
        with collecting(self._ctx.corrupt_records) as skipped:
            rows = await self._driver.page_chats(chat_filter, before, size + 1)
        page, corrupt, has_more, last = window(rows, skipped, size, _seq)
        next_cursor = None
        if has_more:
            assert last is not None
            next_cursor = self._ctx.encode_cursor(scope, last)
        return page_of(Chat, page[::-1], next_cursor, has_more, corrupt)

    async def purge(self, deleted_before: datetime) -> int:
        """Implement :meth:`threadkeep.Store.purge`."""
        self._ctx.require_open()
        cutoff = as_aware(deleted_before, "deleted_before")
        removed = 0
        chat_filter = ChatFilter(deleted="only", deleted_before=cutoff)
        while batch := await self._driver.page_chats(chat_filter, None, 100):
            for chat in batch:
                await self._erase_bundle(chat)
                counts = await self._driver.purge_chat(chat.chat_id)
                removed += counts.get("chats", 0)
        return removed

    async def erase_user(self, user_id: str) -> ErasureReceipt:
        """Implement :meth:`threadkeep.Store.erase_user`."""
        self._ctx.require_open()
        user_id = as_key(user_id, "user_id")
        receipt = ErasureReceipt(user_id=user_id)
        receipt.add("hot", self._zero_hot_counts())
        receipt.add("archive", {"bundles": 0, "messages": 0, "steps": 0})
        chat_filter = ChatFilter(user_id=user_id, deleted="include")
        while batch := await self._driver.page_chats(chat_filter, None, 100):
            for chat in batch:
                await self._erase_chat(chat, receipt)
        beyond = await self._driver.erase_user_records(user_id)
        if any(beyond.values()):
            receipt.add("hot", {kind: n for kind, n in beyond.items() if n})
        return receipt

    def _zero_hot_counts(self) -> dict[str, int]:
        kinds = ["chats", "messages"]
        if self._ctx.capabilities.steps:
            kinds += ["steps", "runs"]
        if self._ctx.capabilities.archive:
            kinds.append("archived_ids")
        return dict.fromkeys(kinds, 0)

    async def _erase_chat(self, chat: Chat, receipt: ErasureReceipt) -> None:
        """Remove one chat for ``erase_user``: its bundle first, then its hot records.

        The bundle goes first so that a failure leaves the hot chat (and its
        ``archive_ref``) in place for a retry, never an unreachable object. A rehydrated
        chat keeps its ref (``_store_tiering.py``): its bundle holds copies of rows that
        are hot again, so the bundle's rows count under ``"archive"`` only beyond what the
        hot store removed (each record once).
        """
        bundle = await self._erase_bundle(chat)
        hot = await self._driver.purge_chat(chat.chat_id)
        only_archived = {
            kind: max(0, bundle.get(kind, 0) - hot.get(kind, 0)) for kind in ("messages", "steps")
        }
        receipt.add("archive", {"bundles": bundle.get("bundles", 0), **only_archived})
        receipt.add("hot", hot)

    async def _erase_bundle(self, chat: Chat) -> dict[str, int]:
        """Delete the bundle ``chat.archive_ref`` names; return its counts.

        Keys ``bundles``, ``messages``, ``steps``; zeros when the chat has no ref.
        """
        if not chat.archive_ref:
            return {"bundles": 0, "messages": 0, "steps": 0}
        from ._store_tiering import erase_bundle

        return await erase_bundle(chat)

    async def _rehydrate_if_archived(self, chat_id: UUID) -> bool:
        """Rehydrate the chat if it is live and archived; return whether it was."""
        chat = await self._driver.get_chat(chat_id)
        if chat is None or chat.deleted_at is not None or chat.status is not ChatStatus.ARCHIVED:
            return False
        await self._rehydrate(chat)
        return True

    async def _rehydrate_holder(self, item_id: UUID) -> bool:
        """Rehydrate the archived chat holding ``item_id``; return whether one was.

        ``item_id`` is a message, tool call or reasoning id, looked up in the driver's
        archived-id index (``index_archived_ids``).
        """
        try:
            chat_id = await self._driver.archived_chat_of(item_id)
        except CapabilityNotSupported:
            return False
        return chat_id is not None and await self._rehydrate_if_archived(chat_id)

    async def _require_hot_chat(self, chat_id: UUID) -> Chat:
        """Return the live chat, rehydrating it first if it is archived.

        Raises:
            ChatNotFound: If it does not exist or is deleted.
        """
        chat = await self.get_chat(chat_id)
        if chat.status is ChatStatus.ARCHIVED:
            chat = await self._rehydrate(chat)
        return chat

    async def _rehydrate(self, chat: Chat) -> Chat:
        """Bring an archived chat's messages and steps back into the hot store.

        Opens the archive driver that the chat's ``archive_ref`` names (no configuration
        needed), restores from the bundle and flips the chat to active
        (``threadkeep._store_tiering.rehydrate``; docs/archive.md, "Tiered reads").

        Raises:
            UnknownDriver: If the archive driver the ref names is not installed.
            ArchiveIntegrityError: If the bundle does not match its ref.
            BackendUnavailable / ArchiveError: If the archive fails; retry.
        """
        from ._store_tiering import rehydrate

        return await rehydrate(self._ctx, chat)
