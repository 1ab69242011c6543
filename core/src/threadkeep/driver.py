"""Everything a driver author needs from threadkeep core, and nothing else (issue 13).

A driver is an object that :class:`threadkeep.Store` holds (``Store(driver)``); it never
subclasses ``Store``. A driver package imports from here and from :mod:`threadkeep`
(models, errors), never from a private ``threadkeep._...`` module. What it finds:

- The seam: :class:`Driver`, the fifteen required primitives, and the optional protocols
  the store detects with ``isinstance`` once, when it is built, so a capability exists
  exactly when its code does (:data:`CAPABILITY_PROTOCOLS`: ``steps`` is
  :class:`StepsDriver` + :class:`RunsDriver`, ``archive`` is :class:`ArchiveDriver`);
  the fast paths (:class:`MessagesAfterDriver`, :class:`LastBoundaryDriver`,
  :class:`PreviewsDriver`, :class:`BulkLoadDriver`, :class:`CommitRunDriver`, ...) replace
  what core derives from the required primitives. :class:`DriverSetup` is what ``open``
  receives; :data:`NestedKind`, :data:`STORE_WRITE_PRIMITIVES`, :data:`WRITE_PRIMITIVES`.
- :class:`DriverBase`, an optional base class: URL and option checks, ``open`` as two
  hooks, and the row helpers bound to the store's models.
- The row helpers: :class:`Records` (``message_from_row``, ``messages_from_rows``,
  ``prepare``...), :func:`record_body`, :func:`record_from_body`,
  :func:`records_from_rows`, :func:`message_body`.
- Rules every driver applies inside its atomic append, written once: :func:`resolve_batch`
  (``agui_id`` idempotency, raising :class:`~threadkeep.IdempotencyConflict` before anything
  is written), :func:`idempotency_conflict` and :func:`fingerprint` (of a stored message;
  :class:`PreparedMessage` carries the fingerprint of a new one).
- Cancellation safety for connection checkouts, ``BEGIN`` and ``COMMIT``: :func:`complete`,
  :func:`finish`, :func:`enter_whole`.
- Copies: :func:`plain_copy` (a copy of plain JSON data, or :data:`NOT_PLAIN` for anything a
  JSON round trip would not give back equal), for returning a record without parsing the
  body just written.
- Packaging: :func:`lazy_exports` (a package ``__getattr__`` that keeps heavy imports out
  of plugin loading), :func:`store_for` (a driver's ``XStore(url, **options)`` factory),
  :func:`check_key` (the object-key rule of archive drivers).

``docs/writing-a-driver.md`` walks through a driver built from these.
"""

from __future__ import annotations

from ._archive._objects import check_key
from ._batch import fingerprint, idempotency_conflict, resolve_batch, same_payload
from ._content import PreparedMessage
from ._driver import (
    CAPABILITY_PROTOCOLS,
    OPTIONAL_PROTOCOLS,
    STORE_WRITE_PRIMITIVES,
    WRITE_PRIMITIVES,
    ArchiveDriver,
    ArchivedRowsDriver,
    ArchivedStepsDriver,
    ArchiveIndexDriver,
    BulkLoadDriver,
    ChatsByThreadDriver,
    CommitRunDriver,
    Driver,
    DriverSetup,
    LastBoundaryDriver,
    LastMessagesDriver,
    LoadChatsDriver,
    LoadedChat,
    MessagesAfterDriver,
    MigratingDriver,
    NestedByAguiIdDriver,
    NestedKind,
    PreviewsDriver,
    RunContextDriver,
    RunsDriver,
    StepsDriver,
    UserErasureDriver,
    protocol_members,
)
from ._driver_base import DriverBase
from ._open import store_for
from ._plugins import lazy_exports
from ._primitives import Primitives, chats_with_last, check_driver
from ._records import Records, message_body, record_body, record_from_body, records_from_rows
from ._shielding import complete, enter_whole, finish
from ._store_run_batch import NOT_PLAIN, plain_copy

__all__ = [  # noqa: RUF022 - plain sorted(), as test_driver_module.py checks
    "ArchiveDriver",
    "ArchiveIndexDriver",
    "ArchivedRowsDriver",
    "ArchivedStepsDriver",
    "BulkLoadDriver",
    "CAPABILITY_PROTOCOLS",
    "ChatsByThreadDriver",
    "CommitRunDriver",
    "Driver",
    "DriverBase",
    "DriverSetup",
    "LastBoundaryDriver",
    "LastMessagesDriver",
    "LoadChatsDriver",
    "LoadedChat",
    "MessagesAfterDriver",
    "MigratingDriver",
    "NOT_PLAIN",
    "NestedByAguiIdDriver",
    "NestedKind",
    "OPTIONAL_PROTOCOLS",
    "PreparedMessage",
    "PreviewsDriver",
    "Primitives",
    "Records",
    "RunContextDriver",
    "RunsDriver",
    "STORE_WRITE_PRIMITIVES",
    "StepsDriver",
    "UserErasureDriver",
    "WRITE_PRIMITIVES",
    "chats_with_last",
    "check_driver",
    "check_key",
    "complete",
    "enter_whole",
    "fingerprint",
    "finish",
    "idempotency_conflict",
    "lazy_exports",
    "message_body",
    "plain_copy",
    "protocol_members",
    "record_body",
    "record_from_body",
    "records_from_rows",
    "resolve_batch",
    "same_payload",
    "store_for",
]
