"""threadkeep-memservice: a memory-service emulator and the threadkeep driver on top of it.

``open_store("memservice://NAME")`` opens :class:`MemServiceStore` on the process-wide
emulator ``NAME``; the emulator itself is :mod:`threadkeep_memservice.emulator`. The
driver's design (seq, atomicity, locators) is in the ``MemServiceStore`` module docstring.
"""

from ._cache import LRUCache
from ._codec import PLACEHOLDER, decode_strings, encode_strings
from ._errors import map_service_errors
from ._faults import is_locator_write, locator_write_fault
from ._locators import ChatSessionRegistry, Location, LocatorIndex
from ._store import MemServiceDriver, MemServiceStore

__all__ = [
    "PLACEHOLDER",
    "ChatSessionRegistry",
    "LRUCache",
    "Location",
    "LocatorIndex",
    "MemServiceDriver",
    "MemServiceStore",
    "decode_strings",
    "encode_strings",
    "is_locator_write",
    "locator_write_fault",
    "map_service_errors",
]
