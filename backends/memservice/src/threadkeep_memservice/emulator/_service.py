"""``MemoryService``: the in-process emulator, and the process-wide named instances."""

from __future__ import annotations

import threading

from ._events import EventOps

__all__ = ["MemoryService", "drop_named_service", "named_service"]


class MemoryService(EventOps):
    """An in-process, async emulator of a hosted session/event memory service.

    The model: **spaces** hold **sessions** (dedup key, description, participants,
    metadata, version); sessions hold **events** (type, body, sequence id, optional dedup
    key, version token). There is no query across sessions and no transaction: the only
    atomic units are one call on one session (a batch of up to 200 events included), and
    the only concurrency control is ``If-Match`` on the session version or an event's
    version token. Listing sessions needs a description prefix or a participant.

    Soft deletes hide a record and free its dedup key; it disappears for good
    ``soft_delete_ttl`` seconds later (service clock). Every call passes through
    :attr:`faults` (fail / time out / slow, by rule) and is counted in :attr:`calls`
    (``Counter`` by operation name) and logged in :attr:`call_log`.

    Operations: ``create_space``, ``get_space``; ``create_session``, ``get_session``,
    ``find_session``, ``list_sessions``, ``update_session``, ``delete_session``,
    ``undelete_session``, ``purge_session``; ``create_events``, ``get_events``,
    ``list_events``, ``patch_events``, ``delete_events``, ``batch_events`` (create, patch
    and delete in one atomic call). Limits are in
    :mod:`threadkeep_memservice.emulator` (``MAX_DOCUMENT_BYTES``, ``MAX_BATCH``...).

    Args:
        seed: Seed of the fault table's random source.
        clock: The service's clock, seconds since the epoch.
        soft_delete_ttl: Seconds a soft-deleted record survives (default 30 days).
        log_size: How many recent calls :attr:`call_log` keeps.
    """


_NAMED: dict[str, MemoryService] = {}
_NAMED_LOCK = threading.Lock()


def named_service(name: str) -> MemoryService:
    """Return the process-wide emulator called ``name``, creating it on first use.

    ``memservice://NAME`` stores share it: two stores over one name behave like two
    replicas of an application talking to one hosted service.
    """
    with _NAMED_LOCK:
        service = _NAMED.get(name)
        if service is None:
            service = _NAMED[name] = MemoryService()
        return service


def drop_named_service(name: str) -> None:
    """Forget the emulator called ``name`` (its data goes with it); unknown names are ignored."""
    with _NAMED_LOCK:
        _NAMED.pop(name, None)
