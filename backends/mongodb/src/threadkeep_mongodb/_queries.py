"""``ChatFilter`` and ``MessageFilter`` as MongoDB queries.

They must select exactly what :func:`threadkeep.chat_matches` and
:func:`threadkeep.message_matches` select (the contract suite compares drivers with them).
User values are only ever query *values* (``$eq``, ``$in``, an escaped ``$regex``), never
keys, so a value cannot become an operator.
"""

from __future__ import annotations

from threadkeep import ChatFilter, MessageFilter

from ._codec import Document, to_us

__all__ = ["chat_query", "literal_regex", "message_query"]

_VISIBLE = {"deleted_us": None}


def literal_regex(text: str) -> str:
    r"""Return a PCRE pattern matching ``text`` literally (a substring search).

    Every ASCII character that is not a letter or digit is backslash-escaped (always a
    literal in PCRE) and NUL becomes ``\x00`` (BSON patterns cannot hold NUL bytes).
    """
    out = []
    for char in text:
        if char == "\0":
            out.append("\\x00")
        elif char.isascii() and not char.isalnum():
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def _deleted_clause(chat_filter: ChatFilter) -> Document:
    if chat_filter.deleted == "exclude":
        return {"live": True}
    if chat_filter.deleted == "only":
        return {"deleted_us": {"$ne": None}}
    return {}


def _visible_to_clauses(chat_filter: ChatFilter) -> list[Document]:
    viewer = chat_filter.visible_to
    if viewer is None:
        return []
    # Tenants never mix, and None is a tenant of its own (``chat_visible_to``): a viewer
    # without a tenant matches only chats whose tenant_id is null.
    clauses: list[Document] = [{"tenant_id": {"$eq": viewer.tenant_id}}]
    reach: list[Document] = [{"user_id": {"$eq": viewer.user_id}}]
    if viewer.team_id is not None:
        reach.append({"share": "team", "team_id": {"$eq": viewer.team_id}})
    clauses.append({"$or": reach})
    return clauses


def chat_query(chat_filter: ChatFilter, before_seq: int | None) -> Document:
    """Return the query selecting the chats of ``chat_filter`` with ``seq < before_seq``."""
    clauses: list[Document] = [_deleted_clause(chat_filter)]
    for field in ("user_id", "tenant_id", "team_id", "agent_id", "channel"):
        wanted = getattr(chat_filter, field)
        if wanted is not None:
            clauses.append({field: {"$eq": wanted}})
    if chat_filter.status is not None:
        clauses.append({"status": str(chat_filter.status)})
    if chat_filter.keyword is not None:
        pattern = literal_regex(chat_filter.keyword.casefold())
        clauses.append({"name_folded": {"$regex": pattern}})
    clauses += _visible_to_clauses(chat_filter)
    if chat_filter.idle_before is not None:
        clauses.append({"idle_us": {"$lt": to_us(chat_filter.idle_before)}})
    if chat_filter.deleted_before is not None:
        clauses.append({"deleted_us": {"$lt": to_us(chat_filter.deleted_before)}})
    if before_seq is not None:
        clauses.append({"seq": {"$lt": before_seq}})
    clauses = [c for c in clauses if c]
    return {"$and": clauses} if clauses else {}


def message_query(message_filter: MessageFilter) -> Document:
    """Return the conditions of ``message_filter`` on visible messages (no chat or seq)."""
    query: Document = dict(_VISIBLE)
    if message_filter.roles is not None:
        query["role"] = {"$in": sorted(str(r) for r in message_filter.roles)}
    if message_filter.kinds is not None:
        query["kind"] = {"$in": sorted(str(k) for k in message_filter.kinds)}
    for field in ("run_id", "request_id", "block_id"):
        wanted = getattr(message_filter, field)
        if wanted is not None:
            query[field] = {"$eq": wanted}
    return query
