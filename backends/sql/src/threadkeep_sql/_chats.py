"""Chat primitives and the cursor secret of the SQL driver."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from functools import partial
from typing import Any
from uuid import UUID

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from threadkeep import Chat, ChatFilter, Conflict, Share, chat_deduplication_key, chat_matches

from ._base import SqlBase
from ._errors import map_native_errors
from ._lite import LiteOps, run_on_thread
from ._schema import (
    CHAT_COLUMNS,
    archived_ids,
    chats,
    escape_key,
    message_refs,
    messages,
    runs,
    settings,
    steps,
)

__all__ = [
    "ChatsMixin",
    "chat_filter_clauses",
    "chat_filter_shape",
    "chat_page",
    "needs_recheck",
]

_SECRET_KEY = "cursor_secret"  # noqa: S105 - the settings row that holds it, not a secret
_INSERT_ATTEMPTS = 8

_GET_CHAT = sa.select(*CHAT_COLUMNS).where(chats.c.chat_id == sa.bindparam("chat_id"))
_FIND_LIVE = sa.select(*CHAT_COLUMNS).where(
    chats.c.dedup_key == sa.bindparam("dedup_key"), chats.c.deleted_at.is_(None)
)
_GET_SECRET = sa.select(settings.c.value).where(settings.c.key == _SECRET_KEY)
_INSERT_CHAT = {
    name: module.insert(chats)
    .on_conflict_do_nothing(
        index_elements=[chats.c.dedup_key], index_where=chats.c.deleted_at.is_(None)
    )
    .returning(chats.c.seq)
    for name, module in (("postgresql", postgresql), ("sqlite", sqlite))
}
"""A chat row unless a live chat holds its key, returning its seq; per dialect."""


def _all(stmt: sa.Executable, params: dict[str, Any], ops: LiteOps) -> Sequence[Any]:
    return ops.all(stmt, params)


def _chat_columns(chat: Chat) -> dict[str, Any]:
    return {
        "agent_id": chat.agent_id,
        "channel": chat.channel,
        "tenant_id": chat.tenant_id,
        "team_id": chat.team_id,
        "name": chat.name,
        "name_folded": chat.name.casefold() if chat.name is not None else None,
        "status": chat.status.value,
        "share": chat.share.value,
        "archive_ref": chat.archive_ref,
        "updated_at": chat.updated_at,
        "deleted_at": chat.deleted_at,
    }


def _update_chat_statement(checked: bool) -> sa.Update:
    keys = (*_chat_columns(Chat.model_construct(user_id="", thread_id="")), "body")
    stmt = sa.update(chats).where(chats.c.chat_id == sa.bindparam("k_chat_id"))
    if checked:
        stmt = stmt.where(chats.c.revision == sa.bindparam("k_revision"))
    values: dict[str, Any] = {key: sa.bindparam(f"v_{key}") for key in keys}
    values["revision"] = chats.c.revision + 1
    return stmt.values(values).returning(*CHAT_COLUMNS)


_UPDATE_CHAT = {checked: _update_chat_statement(checked) for checked in (False, True)}
"""A chat's columns and body rewritten, compare-and-set on its revision when ``True``;
built once, so SQLite compiles it once (the parameters: ``v_<column>``, ``k_chat_id``,
``k_revision``)."""


def chat_filter_shape(
    chat_filter: ChatFilter, dialect: str
) -> tuple[tuple[Hashable, ...], dict[str, Any]]:
    """Return ``(shape, params)`` of a ``ChatFilter`` (the rules of ``threadkeep.chat_matches``).

    ``shape`` names the WHERE clauses the filter needs (see :func:`chat_filter_clauses`) and
    ``params`` the values of their bind parameters, so one statement (built and compiled
    once) serves every filter of a shape. Key columns are stored escaped (``escape_key``);
    their bind parameters escape values the same way, and the keyword is escaped here.
    """
    shape: list[Hashable] = [dialect, chat_filter.deleted]
    params: dict[str, Any] = {}
    for field in ("user_id", "tenant_id", "team_id", "agent_id", "channel"):
        wanted = getattr(chat_filter, field)
        if wanted is not None:
            shape.append(("eq", field, f"f_{field}"))
            params[f"f_{field}"] = wanted
    if chat_filter.status is not None:
        shape.append(("eq", "status", "f_status"))
        params["f_status"] = chat_filter.status.value
    if chat_filter.keyword is not None:
        shape.append("keyword")
        params["f_keyword"] = escape_key(chat_filter.keyword.casefold())
    viewer = chat_filter.visible_to
    if viewer is not None:
        # Tenants never mix, and None is a tenant of its own (``chat_visible_to``).
        if viewer.tenant_id is None:
            shape.append(("null", "tenant_id"))
        else:
            shape.append(("eq", "tenant_id", "v_tenant_id"))
            params["v_tenant_id"] = viewer.tenant_id
        if viewer.team_id is not None:
            params["v_team_id"] = viewer.team_id
        shape.append(("viewer", viewer.team_id is not None))
        params["v_user_id"] = viewer.user_id
    if chat_filter.idle_before is not None:
        shape.append("idle_before")
        params["f_idle_before"] = chat_filter.idle_before
    if chat_filter.deleted_before is not None:
        shape.append("deleted_before")
        params["f_deleted_before"] = chat_filter.deleted_before
    return tuple(shape), params


def chat_filter_clauses(shape: tuple[Hashable, ...]) -> list[sa.ColumnElement[bool]]:
    """Return the WHERE clauses of a :func:`chat_filter_shape` shape.

    The keyword is matched against ``name_folded`` (``name.casefold()``, written with the
    chat) with ``strpos``/``instr``: a case-folded substring test with no LIKE wildcards to
    escape. Since key columns are stored escaped, some keywords can also match part of an
    escape; the caller re-checks those (see :func:`needs_recheck`).
    """
    c = chats.c
    dialect, deleted, *parts = shape
    clauses: list[sa.ColumnElement[bool]] = []
    if deleted == "exclude":
        clauses.append(c.deleted_at.is_(None))
    elif deleted == "only":
        clauses.append(c.deleted_at.isnot(None))
    for part in parts:
        if isinstance(part, tuple) and part[0] == "eq":
            clauses.append(c[part[1]] == sa.bindparam(part[2]))
        elif isinstance(part, tuple) and part[0] == "null":
            clauses.append(c[part[1]].is_(None))
        elif isinstance(part, tuple) and part[0] == "viewer":
            shared: sa.ColumnElement[bool] = sa.false()
            if part[1]:
                team = c.team_id == sa.bindparam("v_team_id")
                shared = sa.and_(c.share == Share.TEAM.value, team)
            clauses.append(sa.or_(c.user_id == sa.bindparam("v_user_id"), shared))
        elif part == "keyword":
            find = sa.func.strpos if dialect == "postgresql" else sa.func.instr
            keyword = sa.bindparam("f_keyword", type_=sa.Text())
            clauses.append(find(c.name_folded, keyword) > 0)
        elif part == "idle_before":
            idle = sa.func.coalesce(c.last_message_at, c.created_at)
            clauses.append(idle < sa.bindparam("f_idle_before", type_=c.created_at.type))
        elif part == "deleted_before":
            clauses.append(c.deleted_at < sa.bindparam("f_deleted_before"))
    return clauses


_Page = sa.Select[*tuple[Any, ...]]
_CHAT_PAGES: dict[tuple[Hashable, ...], _Page] = {}


def chat_page(
    chat_filter: ChatFilter, dialect: str, before_seq: int | None, limit: int
) -> tuple[_Page, dict[str, Any]]:
    """Return the statement and parameters of one page of chats (newest first).

    The statement is built once per filter shape and kept (there are finitely many shapes),
    so it is compiled once and its prepared statement is reused.
    """
    shape, params = chat_filter_shape(chat_filter, dialect)
    key = (*shape, before_seq is not None)
    stmt = _CHAT_PAGES.get(key)
    if stmt is None:
        stmt = sa.select(*CHAT_COLUMNS).where(*chat_filter_clauses(shape))
        if before_seq is not None:
            stmt = stmt.where(chats.c.seq < sa.bindparam("before"))
        stmt = _CHAT_PAGES[key] = stmt.order_by(chats.c.seq.desc()).limit(sa.bindparam("limit"))
    params["limit"] = limit
    if before_seq is not None:
        params["before"] = before_seq
    return stmt, params


def needs_recheck(chat_filter: ChatFilter) -> bool:
    r"""Return whether SQL may over-match this filter.

    A name's U+0000 is stored as ``\0`` and its backslash as ``\\``, so a keyword
    holding ``0``, a backslash or U+0000 can match part of an escape; those pages are
    re-checked in Python with ``chat_matches`` (exact, at the cost of reading on).
    """
    keyword = chat_filter.keyword
    return keyword is not None and any(ch in keyword for ch in ("0", "\\", "\x00"))


class ChatsMixin(SqlBase):
    """Chat primitives (``threadkeep.driver``, "chats") and ``_load_secret``."""

    async def _load_secret(self, candidate: bytes) -> bytes:
        # Read first: a store that has its secret writes nothing on open (so a read-only
        # SQLite file opens for reads); a new one stores the first opener's candidate.
        async with self._db.read() as conn:
            stored = (await conn.execute(_GET_SECRET)).scalar_one_or_none()
        if stored is None:
            stmt = self._upsert(settings).on_conflict_do_nothing(index_elements=[settings.c.key])
            async with self._db.write() as conn:
                await conn.execute(stmt, {"key": _SECRET_KEY, "value": candidate.hex()})
            async with self._db.read() as conn:
                stored = (await conn.execute(_GET_SECRET)).scalar_one()
        return bytes.fromhex(stored)

    async def insert_chat(self, chat: Chat) -> Chat:
        values = {
            **_chat_columns(chat),
            "chat_id": chat.chat_id,
            "dedup_key": chat.dedup_key,
            "user_id": chat.user_id,
            "thread_id": chat.thread_id,
            "revision": 0,
            "next_seq": 1,
            "next_step_seq": 1,
            "created_at": chat.created_at,
            "last_message_at": chat.last_message_at,
            "body": self.record_body(chat),
        }
        stmt = _INSERT_CHAT[self._db.dialect]
        for _ in range(_INSERT_ATTEMPTS):
            seq = await self._insert_chat_row(stmt, values)
            if seq is not None:
                return chat.model_copy(update={"seq": seq, "revision": 0})
            existing = await self.find_live_chat(chat.user_id, chat.thread_id, chat.tenant_id)
            if existing is not None:
                return existing
        raise Conflict(f"the chat ({chat.user_id!r}, {chat.thread_id!r}) kept changing; retry")

    async def _insert_chat_row(self, stmt: sa.Insert, values: dict[str, Any]) -> int | None:
        """Insert a chat row unless its live key is taken; its seq, or ``None``.

        SQLite: one hop on the connection's thread (``_lite``); it was 8 hand-offs through
        SQLAlchemy (checkout, ``BEGIN IMMEDIATE``, the statement's cursor, ``COMMIT``...),
        paid by every import and AG-UI run that starts a thread.
        """
        if self._db.dialect == "sqlite":
            params = {**values, "seq": None}  # NULL: SQLite assigns the rowid
            rows = await run_on_thread(self._db, partial(_all, stmt, params), write=True)
            return rows[0][0] if rows else None
        async with self._db.write() as conn:
            seq: int | None = (await conn.execute(stmt, values)).scalar_one_or_none()
        return seq

    async def get_chat(self, chat_id: UUID) -> Chat | None:
        async with self._db.runner() as run:
            row = await run.first(_GET_CHAT, {"chat_id": chat_id})
        return None if row is None else self._chat_row(row)

    async def find_live_chat(
        self, user_id: str, thread_id: str, tenant_id: str | None = None
    ) -> Chat | None:
        key = chat_deduplication_key(user_id, thread_id, tenant_id)
        async with self._db.runner() as run:
            row = await run.first(_FIND_LIVE, {"dedup_key": key})
        return None if row is None else self._chat_row(row)

    async def update_chat(self, chat: Chat, expected_revision: int | None) -> Chat | None:
        params = {f"v_{key}": value for key, value in _chat_columns(chat).items()}
        params["v_body"] = self.record_body(chat)
        params["k_chat_id"] = chat.chat_id
        if expected_revision is not None:
            params["k_revision"] = expected_revision
        stmt = _UPDATE_CHAT[expected_revision is not None]
        conflict = (
            f"another live chat holds ({chat.user_id!r}, {chat.thread_id!r}); delete it "
            "before restoring this one"
        )
        row: Sequence[Any] | None
        if self._db.dialect == "sqlite":  # one hop (``_lite``): every import renames its chat
            work = partial(_all, stmt, params)
            rows = await run_on_thread(self._db, work, write=True, conflict=conflict)
            row = rows[0] if rows else None
        else:
            async with self._db.write() as conn:
                with map_native_errors(conflict=conflict):
                    row = (await conn.execute(stmt, params)).first()
        return None if row is None else self._chat_row(row)

    async def page_chats(
        self, chat_filter: ChatFilter, before_seq: int | None, limit: int
    ) -> list[Chat]:
        recheck = needs_recheck(chat_filter)
        found: list[Chat] = []
        while len(found) < limit:
            stmt, params = chat_page(chat_filter, self._db.dialect, before_seq, limit)
            async with self._db.runner() as run:
                rows = await run.all(stmt, params)
            batch = self._chat_rows(rows)
            found += [c for c in batch if chat_matches(chat_filter, c)] if recheck else batch
            if len(rows) < limit:
                break
            before_seq = rows[-1][0]
        return found[:limit]

    async def purge_chat(self, chat_id: UUID) -> dict[str, int]:
        counts: dict[str, int] = {}
        async with self._db.transaction() as conn:
            for kind, table in (
                ("locators", message_refs),
                ("messages", messages),
                ("steps", steps),
                ("runs", runs),
                ("archived_ids", archived_ids),
                ("chats", chats),
            ):
                result = await conn.execute(sa.delete(table).where(table.c.chat_id == chat_id))
                counts[kind] = result.rowcount
        counts.pop("locators")
        return counts
