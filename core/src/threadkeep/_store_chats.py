"""Chat operations of ``Store``: create, read, update, delete, restore, list, purge, erase."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from pydantic import BaseModel, Field

from ._content import validate_model
from ._corrupt import CorruptRow, collecting, window
from ._errors import CapabilityNotSupported, ChatNotFound, Conflict, InvalidArgument
from ._models import Chat, ChatStatus, Message, Share
from ._paging import DEFAULT_PAGE_LIMIT, ChatFilter, Page, Viewer
from ._store_args import CHAT_KEYS, as_aware, as_id, as_key, as_model, check_chat_keys
from ._store_core import StoreCore

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
    if all(isinstance(item, model) for item in items):
        return page_type.model_construct(
            items=items, next_cursor=next_cursor, has_more=has_more, corrupt=corrupt or []
        )
    return page_type(items=items, next_cursor=next_cursor, has_more=has_more, **extra)


_PAGE_TYPES: dict[type[BaseModel], type[Page[Any]]] = {}


def _seq(record: Chat | Message) -> int | None:
    return record.seq


def chat_visible_to(chat: Chat, viewer: Viewer) -> bool:
    """Return whether ``viewer`` may see ``chat`` (SPEC section 3, "Deletion and tenancy").

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


class ChatOps(StoreCore):
    """Chat operations (SPEC section 3, "Ordering and identity", "Deletion and tenancy")."""

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
        """Return the live chat of ``(tenant_id, user_id, thread_id)``, creating it if none.

        Idempotent under concurrency: N parallel calls for one key return one chat and never
        raise for the race (SPEC section 3). When the chat exists, the other arguments are
        ignored and the stored chat is returned unchanged. After the chat is deleted, the
        same key creates a new chat. The tenant is part of the key: a caller naming tenant
        B never gets tenant A's chat (nor a chat without a tenant), but B's own.

        Args:
            user_id: The owner (non-empty).
            thread_id: The caller's thread key (non-empty), for example the AG-UI thread id.
            agent_id: The agent the chat talks to.
            channel: Where the chat happens (``"widget"``, ``"telegram"``, ``"api"``...).
            tenant_id: The tenant, part of the chat's identity (``None`` is a tenant of its
                own); filters never return another tenant's chats.
            team_id: The owner's team (used when ``share`` is ``team``).
            name: A display name.
            share: ``private`` (owner only) or ``team`` (a :class:`Share` or its value).
            metadata: JSON-compatible application data (a dict; no NaN or infinity).

        Returns:
            The stored chat, with ``chat_id``, ``seq`` and timestamps set.

        Raises:
            InvalidArgument: If an argument does not validate (for example an empty id), or
                an id is not a ``str``, has surrounding whitespace or holds a control
                character (``as_key``), or the name is not a ``str``.
            InvalidContent: If a string holds a lone surrogate, or metadata holds NaN or
                infinity.
            BackendUnavailable: If the backend fails.
        """
        self._require_open()
        now = self._now()
        chat = validate_model(
            self.chat_model,
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
        self.record_body(chat)
        return await self._insert_chat(chat)

    async def get_chat(
        self,
        chat_id: UUID | str,
        *,
        viewer: Viewer | Mapping[str, Any] | None = None,
        include_deleted: bool = False,
    ) -> Chat:
        """Return a live chat (active or archived).

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            viewer: When given (a :class:`Viewer` or a mapping of its fields), the chat
                must be visible to this viewer (:func:`chat_visible_to`).
            include_deleted: ``True`` (an operator's read): a soft-deleted chat is
                returned too, with its ``deleted_at`` set, as ``restore_chat`` can bring
                it back; a purged chat is still not found.

        Returns:
            The chat as stored (an archived chat is not rehydrated).

        Raises:
            ChatNotFound: If the chat does not exist, is deleted (unless
                ``include_deleted``), or is not visible to ``viewer``.
            InvalidArgument: If ``chat_id`` is not an id, ``viewer`` does not validate or
                ``include_deleted`` is not a ``bool``.
            BackendUnavailable: If the backend fails.
        """
        self._require_open()
        chat_id = as_id(chat_id, "chat_id")
        seen_by = None if viewer is None else as_model(Viewer, viewer, "viewer")
        if not isinstance(include_deleted, bool):
            raise InvalidArgument(f"include_deleted must be a bool, not {include_deleted!r}")
        chat = await self._get_chat(chat_id)
        if chat is None or (chat.deleted_at is not None and not include_deleted):
            raise ChatNotFound(f"no live chat {chat_id}")
        if seen_by is not None and not chat_visible_to(chat, seen_by):
            raise ChatNotFound(f"no live chat {chat_id} visible to user {seen_by.user_id!r}")
        return chat

    async def find_chat(
        self, user_id: str, thread_id: str, *, tenant_id: str | None = None
    ) -> Chat | None:
        """Return the live chat of ``(tenant_id, user_id, thread_id)``, or ``None``.

        Args:
            user_id: The owner (non-empty).
            thread_id: The caller's thread key (non-empty).
            tenant_id: The tenant (part of the chat's identity). ``None`` finds only a chat
                without a tenant: a tenant's chat is never found without naming it.

        Returns:
            The live chat (active or archived), or ``None`` if there is none (deleted chats
            are not found).

        Raises:
            InvalidArgument: If ``user_id``, ``thread_id`` or ``tenant_id`` is not a clean,
                non-empty ``str`` (``as_key``).
            BackendUnavailable: If the backend fails.
        """
        self._require_open()
        user_id, thread_id = as_key(user_id, "user_id"), as_key(thread_id, "thread_id")
        if tenant_id is None:
            return await self._find_live_chat(user_id, thread_id)
        return await self._find_live_chat(
            user_id, thread_id, tenant_id=as_key(tenant_id, "tenant_id")
        )

    async def update_chat(self, chat_id: UUID | str, /, **changes: Any) -> Chat:
        """Change a live chat's descriptive fields.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            **changes: Any of ``name``, ``agent_id``, ``channel``, ``team_id``, ``share``,
                ``metadata`` (replaced whole). ``tenant_id`` is part of the chat's identity
                (like ``user_id`` and ``thread_id``) and does not change.

        Returns:
            The updated chat (``revision`` and ``updated_at`` advanced).

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            InvalidArgument: If ``chat_id`` is not an id, a field is not changeable or a
                value does not validate.
            InvalidContent: If a string holds a lone surrogate, or metadata NaN/infinity.
            Conflict: If the chat kept changing under concurrent writers.
            BackendUnavailable: If the backend fails.
        """
        chat_id = as_id(chat_id, "chat_id")
        unknown = set(changes) - _MUTABLE_CHAT_FIELDS
        if unknown:
            msg = f"cannot change {sorted(unknown)}; changeable: {sorted(_MUTABLE_CHAT_FIELDS)}"
            raise InvalidArgument(msg)
        changes.update(check_chat_keys(**{k: v for k, v in changes.items() if k in CHAT_KEYS}))
        return await self._rewrite_chat(chat_id, changes, live=True)

    async def rename_chat(self, chat_id: UUID | str, name: str | None) -> Chat:
        """Set a live chat's display name (``update_chat(chat_id, name=name)``).

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            name: The new name, or ``None`` to clear it.

        Returns:
            The updated chat.

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            InvalidArgument: If ``chat_id`` is not an id or ``name`` is not text.
            InvalidContent: If the name holds a lone surrogate.
            Conflict: If the chat kept changing under concurrent writers.
            BackendUnavailable: If the backend fails.
        """
        return await self.update_chat(chat_id, name=name)

    async def delete_chat(self, chat_id: UUID | str) -> Chat:
        """Soft-delete a chat: every read path hides it and its messages from now on.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).

        Returns:
            The deleted chat (``deleted_at`` set). ``restore_chat`` brings it back; ``purge``
            removes it for good.

        Raises:
            ChatNotFound: If the chat does not exist or is already deleted.
            InvalidArgument: If ``chat_id`` is not an id.
            Conflict: If the chat kept changing under concurrent writers.
            BackendUnavailable: If the backend fails.
        """
        chat_id = as_id(chat_id, "chat_id")
        return await self._rewrite_chat(chat_id, {"deleted_at": self._now()}, live=True)

    async def restore_chat(self, chat_id: UUID | str) -> Chat:
        """Bring back a soft-deleted chat, and rehydrate it if it is archived.

        A live, active chat is returned unchanged.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).

        Returns:
            The live, active chat.

        Raises:
            ChatNotFound: If the chat does not exist (or was purged).
            Conflict: If another live chat now holds its ``(tenant_id, user_id, thread_id)``.
            InvalidArgument: If ``chat_id`` is not an id.
            ArchiveError / ArchiveIntegrityError / UnknownDriver: If its bundle cannot be
                read back (see ``docs/archive.md``).
            BackendUnavailable: If the backend fails.
        """
        self._require_open()
        chat_id = as_id(chat_id, "chat_id")
        chat = await self._get_chat(chat_id)
        if chat is None:
            raise ChatNotFound(f"no chat {chat_id}")
        if chat.deleted_at is not None:
            chat = await self._rewrite_chat(chat_id, {"deleted_at": None}, live=False)
        if chat.status is ChatStatus.ARCHIVED:
            chat = await self._rehydrate(chat)
        return chat

    async def _rewrite_chat(self, chat_id: UUID, changes: dict[str, Any], *, live: bool) -> Chat:
        self._require_open()
        for _ in range(_CAS_ATTEMPTS):
            chat = await self._get_chat(chat_id)
            if chat is None or (live and chat.deleted_at is not None):
                raise ChatNotFound(f"no live chat {chat_id}")
            data = {**chat.model_dump(), **changes, "updated_at": self._now()}
            updated = validate_model(self.chat_model, data)
            self.record_body(updated)
            stored = await self._update_chat(updated, chat.revision)
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
        """Return one page of chats, newest created first (keyset on the store's chat seq).

        Args:
            chat_filter: Which chats (a :class:`ChatFilter` or a mapping of its fields;
                default: every live chat). Never crosses ``tenant_id`` when one is given.
            limit: Chats per page (count); default 50, capped at 200.
            cursor: ``next_cursor`` of the previous page, issued for the same filter.

        Returns:
            ``Page[Chat]``: ``items`` run oldest to newest within the page, ``next_cursor``
            walks to older chats, ``has_more`` says whether there are any.

        Raises:
            InvalidArgument: If ``limit`` is not an integer of at least 1, or the filter
                does not validate (for example a naive datetime).
            InvalidCursor: If the cursor is foreign, altered or for another filter.
            BackendUnavailable: If the backend fails.
        """
        chat_filter, size, scope, before = self._chat_page_start(chat_filter, limit, cursor)
        with collecting(self.corrupt_records) as skipped:
            rows = await self._page_chats(chat_filter, before, size + 1)
        page, corrupt, has_more, last = window(rows, skipped, size, _seq)
        next_cursor = None
        if has_more:
            assert last is not None
            next_cursor = self._encode_cursor(scope, last)
        return page_of(Chat, page[::-1], next_cursor, has_more, corrupt)

    async def purge(self, deleted_before: datetime) -> int:
        """Remove for good every chat soft-deleted before ``deleted_before``.

        A purged chat's archived bundle (named by its ``archive_ref``) is deleted first.

        Args:
            deleted_before: The cutoff, a timezone-aware ``datetime``: chats whose
                ``deleted_at`` is earlier go (the retention period is the caller's choice,
                for example ``datetime.now(UTC) - timedelta(days=30)``).

        Returns:
            How many chats were removed (their messages, steps, runs and bundles go with
            them).

        Raises:
            InvalidArgument: If ``deleted_before`` is not an aware ``datetime``.
            BackendUnavailable / ArchiveError: If a bundle cannot be deleted; that chat
                and the ones after it stay, so run ``purge`` again.
        """
        self._require_open()
        cutoff = as_aware(deleted_before, "deleted_before")
        removed = 0
        chat_filter = ChatFilter(deleted="only", deleted_before=cutoff)
        while batch := await self._page_chats(chat_filter, None, 100):
            for chat in batch:
                await self._erase_bundle(chat)
                counts = await self._purge_chat(chat.chat_id)
                removed += counts.get("chats", 0)
        return removed

    async def erase_user(self, user_id: str) -> ErasureReceipt:
        """Remove every chat of a person (live, deleted and archived) and all it holds.

        Each chat's bundle goes first, then its hot records (SPEC section 3, "Deletion and
        tenancy"), so a failure leaves something a retry finds.

        Args:
            user_id: The person (non-empty), as chats' ``user_id``.

        Returns:
            An :class:`ErasureReceipt` whose ``stores`` always holds ``"hot"`` and
            ``"archive"`` counts (zeros for an unknown person), each record counted once.

        Raises:
            InvalidArgument: If ``user_id`` is not a non-empty ``str``.
            BackendUnavailable / ArchiveError / UnknownDriver: If a bundle or the backend
                cannot be reached; what was erased stays erased, so run it again.
        """
        self._require_open()
        user_id = as_key(user_id, "user_id")
        receipt = ErasureReceipt(user_id=user_id)
        receipt.add("hot", self._zero_hot_counts())
        receipt.add("archive", {"bundles": 0, "messages": 0, "steps": 0})
        chat_filter = ChatFilter(user_id=user_id, deleted="include")
        while batch := await self._page_chats(chat_filter, None, 100):
            for chat in batch:
                await self._erase_chat(chat, receipt)
        return receipt

    def _zero_hot_counts(self) -> dict[str, int]:
        kinds = ["chats", "messages"]
        if self.capabilities.steps:
            kinds += ["steps", "runs"]
        if self.capabilities.archive:
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
        hot = await self._purge_chat(chat.chat_id)
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
        chat = await self._get_chat(chat_id)
        if chat is None or chat.deleted_at is not None or chat.status is not ChatStatus.ARCHIVED:
            return False
        await self._rehydrate(chat)
        return True

    async def _rehydrate_holder(self, item_id: UUID) -> bool:
        """Rehydrate the archived chat holding ``item_id``; return whether one was.

        ``item_id`` is a message, tool call or reasoning id, looked up in the driver's
        archived-id index (``_index_archived_ids``).
        """
        try:
            chat_id = await self._archived_chat_of(item_id)
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

        return await rehydrate(self, chat)
