"""``S3Archive``: bundles on S3-compatible object storage (``s3://bucket/prefix``)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from types import TracebackType
from typing import Any, ClassVar, Self
from urllib.parse import urlsplit

from aiobotocore.config import AioConfig  # type: ignore[import-untyped]
from aiobotocore.session import get_session  # type: ignore[import-untyped]

from threadkeep import InvalidArgument, ObjectInfo
from threadkeep.driver import check_key

from ._errors import map_s3_errors

__all__ = ["S3Archive"]

PART_SIZE = 8 << 20
"""Bytes per multipart part (S3's minimum is 5 MiB); bodies up to this go in one put."""

_READ_CHUNK = 1 << 20
_LOADER: Any = None
_SEEN_BUCKETS: set[tuple[str | None, str]] = set()


def _session() -> Any:
    """A new session (credentials are resolved afresh) sharing one model loader.

    Loading botocore's S3 service model takes about a second; the loader caches it, so
    every archive opened in the process after the first starts in milliseconds.
    """
    global _LOADER  # noqa: PLW0603 - a process-wide cache, like botocore's own
    session = get_session()
    if _LOADER is None:
        _LOADER = session.get_component("data_loader")
    else:
        session.register_component("data_loader", _LOADER)
    return session


class S3Archive:
    """An :class:`threadkeep.typing.ArchiveStore` on S3 (aiobotocore, async).

    Credentials, region and endpoint come from the standard AWS environment and
    configuration (``AWS_ACCESS_KEY_ID``, ``AWS_PROFILE``, ``AWS_DEFAULT_REGION``,
    ``AWS_ENDPOINT_URL_S3``...). Create-only puts send ``If-None-Match: *``; replacing puts
    send ``If-Match: <etag>``; bodies larger than ``part_size`` go as a multipart upload
    whose completion carries the same condition, so nothing is visible at the key until
    the whole bundle is stored.

    Args:
        url: ``s3://bucket`` or ``s3://bucket/prefix``.
        part_size: Bytes per uploaded part (at least 5 MiB); memory holds about one part.
        config: Extra ``AioConfig`` (timeouts, retries) merged over the defaults.
    """

    schemes: ClassVar[tuple[str, ...]] = ("s3",)

    def __init__(
        self, url: str, *, part_size: int = PART_SIZE, config: AioConfig | None = None
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme != "s3" or not parts.netloc:
            raise InvalidArgument(f"{url!r} is not an archive URL like 's3://bucket/prefix'")
        if part_size < 5 << 20:
            raise InvalidArgument("part_size must be at least 5 MiB (S3's minimum part)")
        self.url = url.rstrip("/")
        self.bucket = parts.netloc
        self.prefix = parts.path.strip("/")
        self.part_size = part_size
        defaults = AioConfig(
            retries={"max_attempts": 4, "mode": "standard"}, connect_timeout=10, read_timeout=60
        )
        self._config = defaults.merge(config) if config is not None else defaults
        self._client: Any = None
        self._exit: contextlib.AsyncExitStack | None = None

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        """Build an unopened archive for ``url``; see the class docstring."""
        return cls(url, **options)

    async def open(self) -> Self:
        """Create the client and check that the bucket answers.

        Raises:
            ArchiveError: If the bucket is missing or access is refused.
            BackendUnavailable: If S3 cannot be reached.
        """
        if self._client is not None:
            return self
        stack = contextlib.AsyncExitStack()
        client = await stack.enter_async_context(
            _session().create_client("s3", config=self._config)
        )
        # The bucket is checked once per process and endpoint (a round trip of ~0.1 s on
        # some servers; rehydration opens an archive per chat). Later failures still map.
        seen = (client.meta.endpoint_url, self.bucket)
        try:
            if seen not in _SEEN_BUCKETS:
                with map_s3_errors(f"s3://{self.bucket}", missing="bucket"):
                    await client.head_bucket(Bucket=self.bucket)
                _SEEN_BUCKETS.add(seen)
        except BaseException:
            await stack.aclose()
            raise
        self._client, self._exit = client, stack
        return self

    async def close(self) -> None:
        """Close the client; idempotent."""
        if self._exit is not None:
            stack, self._exit, self._client = self._exit, None, None
            await stack.aclose()

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def _key(self, key: str) -> str:
        check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def ref_for(self, key: str) -> str:
        """Return ``s3://bucket/prefix/key``."""
        return f"{self.url}/{check_key(key)}"

    @property
    def client(self) -> Any:
        """The aiobotocore client (open first)."""
        if self._client is None:
            raise InvalidArgument("the S3 archive is not open; use `async with` or open()")
        return self._client

    # -- writes ----------------------------------------------------------------------------

    async def put(
        self,
        key: str,
        chunks: AsyncIterable[bytes],
        *,
        metadata: Mapping[str, str],
        if_match: str | None = None,
    ) -> ObjectInfo:
        """Store ``chunks`` at ``key``; see :meth:`threadkeep.typing.ArchiveStore.put`.

        Memory: about one part (``part_size`` bytes) is buffered.

        Raises:
            Conflict: If the precondition fails (key taken / etag changed).
            BackendUnavailable / ArchiveError: As mapped by ``map_s3_errors``.
        """
        full = self._key(key)
        condition = {"IfMatch": if_match} if if_match else {"IfNoneMatch": "*"}
        upload = _Multipart(self.client, self.bucket, full, dict(metadata))
        buffer, size = bytearray(), 0
        try:
            async for chunk in chunks:
                buffer += chunk
                size += len(chunk)
                while len(buffer) >= self.part_size:
                    await upload.send(bytes(buffer[: self.part_size]))
                    del buffer[: self.part_size]
            if upload.upload_id is None:
                with map_s3_errors(f"put {self.ref_for(key)}"):
                    response = await self.client.put_object(
                        Bucket=self.bucket,
                        Key=full,
                        Body=bytes(buffer),
                        Metadata=dict(metadata),
                        **condition,
                    )
                etag = response["ETag"]
            else:
                if buffer:
                    await upload.send(bytes(buffer))
                etag = await upload.complete(condition)
        except BaseException:
            await upload.abort()
            raise
        return ObjectInfo(key=key, size=size, etag=etag, metadata=dict(metadata))

    async def delete(self, key: str) -> bool:
        """Remove the object at ``key``; return whether one was there."""
        existed = await self.head(key) is not None
        with map_s3_errors(f"delete {self.ref_for(key)}"):
            await self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
        return existed

    # -- reads -----------------------------------------------------------------------------

    async def head(self, key: str) -> ObjectInfo | None:
        """Return the object's size, etag and metadata, or ``None``."""
        with map_s3_errors(f"head {self.ref_for(key)}"):
            try:
                response = await self.client.head_object(Bucket=self.bucket, Key=self._key(key))
            except self.client.exceptions.ClientError as exc:
                status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                if status == 404 or exc.response.get("Error", {}).get("Code") in (
                    "404",
                    "NoSuchKey",
                ):
                    return None
                raise
        return ObjectInfo(
            key=key,
            size=int(response["ContentLength"]),
            etag=response["ETag"],
            metadata=dict(response.get("Metadata", {})),
        )

    async def get(self, key: str) -> AsyncIterator[bytes]:
        """Yield the object's bytes in chunks of up to 1 MiB.

        Raises:
            ArchiveError: If there is no object at ``key``.
        """
        where = f"get {self.ref_for(key)}"
        with map_s3_errors(where):
            response = await self.client.get_object(Bucket=self.bucket, Key=self._key(key))
        body = response["Body"]
        try:
            while True:
                with map_s3_errors(where):
                    chunk = await body.read(_READ_CHUNK)
                if not chunk:
                    return
                yield chunk
        finally:
            body.close()

    async def list(self, prefix: str = "") -> AsyncIterator[ObjectInfo]:
        """Yield the objects whose key starts with ``prefix``, in key order.

        ``metadata`` is empty here (S3 lists do not return it); ``head`` gives it.
        """
        root = f"{self.prefix}/" if self.prefix else ""
        paginator = self.client.get_paginator("list_objects_v2")
        with map_s3_errors(f"list {self.url}/{prefix}"):
            async for page in paginator.paginate(Bucket=self.bucket, Prefix=root + prefix):
                for item in page.get("Contents", []):
                    yield ObjectInfo(
                        key=item["Key"][len(root) :], size=int(item["Size"]), etag=item["ETag"]
                    )


class _Multipart:
    """One multipart upload, created lazily on the first full part."""

    def __init__(self, client: Any, bucket: str, key: str, metadata: dict[str, str]) -> None:
        self.client, self.bucket, self.key, self.metadata = client, bucket, key, metadata
        self.upload_id: str | None = None
        self.parts: list[dict[str, Any]] = []

    async def send(self, body: bytes) -> None:
        where = f"upload s3://{self.bucket}/{self.key}"
        with map_s3_errors(where):
            if self.upload_id is None:
                created = await self.client.create_multipart_upload(
                    Bucket=self.bucket, Key=self.key, Metadata=self.metadata
                )
                self.upload_id = created["UploadId"]
            number = len(self.parts) + 1
            response = await self.client.upload_part(
                Bucket=self.bucket,
                Key=self.key,
                UploadId=self.upload_id,
                PartNumber=number,
                Body=body,
            )
        self.parts.append({"PartNumber": number, "ETag": response["ETag"]})

    async def complete(self, condition: dict[str, str]) -> str:
        with map_s3_errors(f"complete s3://{self.bucket}/{self.key}"):
            response = await self.client.complete_multipart_upload(
                Bucket=self.bucket,
                Key=self.key,
                UploadId=self.upload_id,
                MultipartUpload={"Parts": self.parts},
                **condition,
            )
        self.upload_id = None  # done: nothing to abort
        return str(response["ETag"])

    async def abort(self) -> None:
        if self.upload_id is None:
            return
        upload_id, self.upload_id = self.upload_id, None
        with contextlib.suppress(Exception):
            await self.client.abort_multipart_upload(
                Bucket=self.bucket, Key=self.key, UploadId=upload_id
            )
