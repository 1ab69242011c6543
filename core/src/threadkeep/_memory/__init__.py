"""The in-memory reference driver."""

from ._store import MemoryStore

__all__ = ["MemoryStore"]
