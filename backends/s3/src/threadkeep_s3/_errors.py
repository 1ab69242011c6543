"""The one place where botocore / aiohttp errors become threadkeep errors."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

import aiohttp
from botocore.exceptions import (  # type: ignore[import-untyped]
    BotoCoreError,
    ClientError,
    HTTPClientError,
    IncompleteReadError,
    NoCredentialsError,
    PartialCredentialsError,
)
from botocore.exceptions import (
    ConnectionError as BotoConnectionError,
)

from threadkeep import ArchiveError, BackendUnavailable, Conflict

__all__ = ["map_s3_errors"]

_CONFLICT = frozenset({"PreconditionFailed", "ConditionalRequestConflict", "412"})
_MISSING = frozenset({"NoSuchKey", "NotFound", "404", "NoSuchUpload"})
_REFUSED = frozenset(
    {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden", "403"}
)
_TRANSIENT = frozenset(
    {"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "503", "500"}
)


def _client_error(exc: ClientError, where: str, missing: str) -> Exception:
    error = exc.response.get("Error", {})
    code = str(error.get("Code", ""))
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    if code in _CONFLICT or status == 412:
        return Conflict(f"{where}: the object changed or exists already ({code})")
    if code == "NoSuchBucket" or (code in _MISSING and missing == "bucket"):
        return ArchiveError(f"{where}: the bucket does not exist; create it first")
    if code in _MISSING:
        return ArchiveError(f"{where}: no such {missing}")
    if code in _REFUSED:
        return ArchiveError(f"{where}: refused ({code}); check the AWS credentials and policy")
    if code in _TRANSIENT or status >= 500:
        return BackendUnavailable(f"{where}: S3 is unavailable ({code or status}); retry")
    return ArchiveError(f"{where}: S3 error {code or status}: {error.get('Message', '')}")


@contextmanager
def map_s3_errors(where: str, missing: str = "object") -> Iterator[None]:
    """Map botocore and transport errors raised inside the block (``where`` names the call).

    ``missing`` names what a 404 means here (``"object"``, or ``"bucket"`` on open).

    ``Conflict`` for failed preconditions, ``BackendUnavailable`` for network failures
    (a connection refused or closed, a download cut short),
    timeouts and 5xx, ``ArchiveError`` for everything the caller must fix (credentials,
    bucket, missing object).
    """
    try:
        yield
    except ClientError as exc:
        raise _client_error(exc, where, missing) from exc
    except (NoCredentialsError, PartialCredentialsError) as exc:
        msg = (
            f"{where}: no AWS credentials; set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile"
        )
        raise ArchiveError(msg) from exc
    except (
        BotoConnectionError,
        HTTPClientError,
        IncompleteReadError,  # a body cut short: the server or the network went away
        aiohttp.ClientError,
        TimeoutError,
    ) as exc:
        raise BackendUnavailable(f"{where}: S3 could not be reached ({exc}); retry") from exc
    except asyncio.CancelledError:
        raise
    except BotoCoreError as exc:
        raise ArchiveError(f"{where}: {exc}") from exc
