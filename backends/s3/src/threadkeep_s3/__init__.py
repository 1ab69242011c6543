"""threadkeep-s3: the cold archive on S3-compatible object storage (``s3://bucket/prefix``).

Installed, it registers the ``s3`` archive scheme; use it through
``threadkeep.open_archiver(store, "s3://bucket/prefix")`` or ``threadkeep archive``.
"""

from ._archive import PART_SIZE, S3Archive
from ._errors import map_s3_errors

__all__ = ["PART_SIZE", "S3Archive", "map_s3_errors"]
