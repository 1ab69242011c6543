"""Cold archive: bundles on object storage, tiered reads, erasure."""

from ._archiver import Archiver, ArchiveResult
from ._bundle import FORMAT_VERSION, BundleReader
from ._file import FileArchive
from ._objects import ArchiveRef, ObjectInfo, bundle_key
from ._service import open_archiver

__all__ = [
    "FORMAT_VERSION",
    "ArchiveRef",
    "ArchiveResult",
    "Archiver",
    "BundleReader",
    "FileArchive",
    "ObjectInfo",
    "bundle_key",
    "open_archiver",
]
