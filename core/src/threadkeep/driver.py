"""Everything a driver author needs from threadkeep core, and nothing else (issue 13).

A driver package imports from here and from :mod:`threadkeep` (models, errors,
:class:`~threadkeep.Store`), never from a private ``threadkeep._...`` module. What it finds:

- The primitives: :class:`DriverPrimitives` (each states what must be atomic and what it
  returns), :data:`NestedKind`, :data:`STORE_WRITE_PRIMITIVES` and :data:`WRITE_PRIMITIVES`.
- Capabilities backed by code: :data:`CAPABILITY_PRIMITIVES` names what each optional
  capability (``steps``, ``archive``) requires; a store whose class declares a capability
  without those primitives is refused when built (``TypeError``), and
  :func:`unimplemented_primitives` lists what is missing.
- Rules every driver applies inside its atomic append, written once: :func:`resolve_batch`
  (``agui_id`` idempotency, raising :class:`~threadkeep.IdempotencyConflict` before anything
  is written), :func:`idempotency_conflict` and :func:`fingerprint` (of a stored message;
  :class:`PreparedMessage` carries the fingerprint of a new one).
- Cancellation safety for connection checkouts, ``BEGIN`` and ``COMMIT``: :func:`complete`,
  :func:`finish`, :func:`enter_whole`.
- Packaging: :func:`lazy_exports` (a package ``__getattr__`` that keeps heavy imports out
  of plugin loading), :func:`check_key` (the object-key rule of archive drivers).

``docs/writing-a-driver.md`` walks through a driver built from these.
"""

from __future__ import annotations

from ._archive._objects import check_key
from ._batch import fingerprint, idempotency_conflict, resolve_batch
from ._content import PreparedMessage
from ._driver import (
    CAPABILITY_PRIMITIVES,
    STORE_WRITE_PRIMITIVES,
    WRITE_PRIMITIVES,
    DriverPrimitives,
    NestedKind,
    unimplemented_primitives,
)
from ._plugins import lazy_exports
from ._shielding import complete, enter_whole, finish

__all__ = [  # noqa: RUF022 - plain sorted(), as test_driver_module.py checks
    "CAPABILITY_PRIMITIVES",
    "DriverPrimitives",
    "NestedKind",
    "PreparedMessage",
    "STORE_WRITE_PRIMITIVES",
    "WRITE_PRIMITIVES",
    "check_key",
    "complete",
    "enter_whole",
    "fingerprint",
    "finish",
    "idempotency_conflict",
    "lazy_exports",
    "resolve_batch",
    "unimplemented_primitives",
]
