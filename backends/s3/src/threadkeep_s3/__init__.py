"""threadkeep-s3: the cold archive on S3-compatible object storage (``s3://bucket/prefix``).

Installed, it registers the ``s3`` archive scheme; use it through
``threadkeep.open_archiver(store, "s3://bucket/prefix")`` or ``threadkeep archive``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadkeep.driver import lazy_exports

if TYPE_CHECKING:
    from ._archive import PART_SIZE, S3Archive
    from ._errors import map_s3_errors

__all__ = [
    "PART_SIZE",
    "S3Archive",
    "map_s3_errors",
]

# Loaded on first use: the plugin entry point imports this package, and loading plugins must
# not pull in the driver's heavy dependencies until its scheme is opened.
_LAZY = {
    "PART_SIZE": "_archive",
    "S3Archive": "_archive",
    "map_s3_errors": "_errors",
}


__getattr__ = lazy_exports(__name__, _LAZY)
