"""The in-memory reference driver."""

from ._store import MemoryDriver, MemoryStore

__all__ = ["MemoryDriver", "MemoryStore"]
