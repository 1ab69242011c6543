"""``MemServiceStore``: threadkeep on a session/event memory service (``memservice://``).

Design (the service has no transactions and no query across sessions; see the emulator in
:mod:`threadkeep_memservice.emulator` for its exact rules):

- **One session per chat.** ``dedup_key = chat_deduplication_key(user_id, thread_id, tenant_id)``:
  concurrent creates adopt one session. Description ``//chat/<chat_id>/``, the owner's
  participant id, the chat record in metadata. ``seq`` is the session's space-wide
  ``sequence_id``; ``revision`` is the session version, which the service grows on every
  write to the session *or any of its events*.
- **One event per message** (type ``message`` or ``boundary``), tool calls and reasonings
  nested in its body; empty strings pass the service's ``min_length=1`` rule through the
  zero-width placeholder codec (:mod:`._codec`). Bodies over the 1 MiB document limit
  are chunked into ``chunk`` events written in the same batch.
- **seq strictly increasing, batches all or nothing, without transactions.** A batch
  append is *one* ``create_events`` call (atomic) when it fits the service's 200 events;
  a bigger one is written in parts chained by ``If-Match`` behind one commit marker that
  readers respect, so it too is all or nothing, also after a crash between parts
  (:mod:`._staging`). The service assigns the heads
  consecutive ``sequence_id``s in commit order: that is the ``seq``. The call carries
  ``If-Match`` = the session version at which the driver saw the chat live and hot, so it
  cannot land in a chat deleted or archived in between; stale -> re-read, retry (bounded,
  jittered). Every other write to a chat (edit, hide, delete, archive delete) is
  conditional on the same version, so the session version is the chat's commit point.
- **Idempotency** rides on event dedup keys derived from ``agui_id`` (``a:<sha256>``): a
  repeated ``agui_id`` is refused by the service, then compared (see :mod:`._appends`).
- **Locators** (``chat:``, ``message:``, ``tool_call:``, ``reasoning:`` + uuid) are sessions
  under ``//loc/<chat_id>/``, written entity first, locator second, best effort
  (:mod:`._locators`). Lookups by uuid: LRU cache, else one locator point read, then point
  reads of the chat session and the head event, checked to hold that uuid, so a stale or
  lost locator means "not found", never the wrong entity. Chat lookups fall back to the
  chat's own description (one indexed listing), which cannot be lost.
- **Deletion**: chat soft delete = metadata ``deleted_at``, then session soft delete
  (frees the key; the service expires it after its TTL); restore undeletes then clears.
  Message hiding = ``deleted_at`` in the event's columns (it keeps its ``agui_id``).

- **Steps** are ``step`` events of the chat's session (one atomic batch per chat per save),
  found by id or stack through an index written *before* them, for real (:mod:`._steps`);
  **runs** are sessions claimed by ``If-Match`` (:mod:`._runs`).

Capabilities: ``transactions=False``, ``strong_uuid_lookup=False`` (lost locators),
``archive=True``, ``steps=True``; persistent only within one process (named emulators).
"""

from __future__ import annotations

from typing import Any, ClassVar

from threadkeep import Capabilities, Store
from threadkeep.driver import store_for

from ._chats import ChatPrimitives
from ._runs import RunPrimitives

__all__ = ["MemServiceDriver", "MemServiceStore"]


class MemServiceDriver(RunPrimitives, ChatPrimitives):
    """threadkeep on the memory-service emulator; see the module docstring for the design.

    ``memservice://`` is a private emulator that lives as long as the store;
    ``memservice://NAME`` is the process-wide emulator called ``NAME``, so two stores over
    one name behave like two replicas of an application (each with its own caches).

    Args:
        url: ``memservice://`` or ``memservice://NAME``.
        faults: Fault rules (:class:`~threadkeep_memservice.emulator.FaultRule`) added to
            the emulator's table while the store is open (``locator_write_fault()``...).
        fault_seed: Reseed the emulator's fault random source on open.
        cache_size: Entries of each in-process LRU cache (chats, locations, sessions).
        space: Dedup key of the space the store works in (default ``"threadkeep"``).
        service: Use this emulator instead of the one the URL names.
        **options: Nothing else: an unknown option is refused.

    Raises:
        InvalidArgument: If the URL or ``cache_size`` is invalid.
    """

    schemes: ClassVar[tuple[str, ...]] = ("memservice",)
    capabilities: ClassVar[Capabilities] = Capabilities(
        transactions=False,
        strong_uuid_lookup=False,
        steps=True,
        archive=True,
        persistent=True,
        concurrent_processes=False,
        notes={
            "strong_uuid_lookup": "locators are written best effort; a lookup by uuid on "
            "another replica may say not found (never the wrong entity)",
            "transactions": "a batch append is one conditional batch call; over the "
            "service's 200 events, staged parts behind one commit marker (all or nothing)",
            "persistent": "within one process, for named emulators (memservice://NAME)",
            "steps": "save_steps is atomic per chat (one batch call per chat)",
        },
    )


def MemServiceStore(url: str = "memservice://", **options: Any) -> Store:  # noqa: N802 - factory
    """Return an unopened ``Store`` holding a :class:`MemServiceDriver` for ``url``.

    Args:
        url: ``memservice://`` or ``memservice://NAME`` (as for :class:`MemServiceDriver`).
        **options: The options of :class:`threadkeep.Store` (``cursor_secret``, ``clock``...)
            and those of :class:`MemServiceDriver` (``faults``, ``cache_size``, ``service``...).

    Returns:
        The store; its driver (``store.driver``) gives the emulator (``service``).

    Raises:
        InvalidArgument: If the URL or an option is invalid.
    """
    return store_for(MemServiceDriver, url, **options)
