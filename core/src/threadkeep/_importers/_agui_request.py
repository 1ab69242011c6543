"""Recorded AG-UI requests (``RunAgentInput``) for the import, and the digests of recordings.

A request is checked (:func:`normalize_request`) when the files are first read, and only
its thread and run ids are kept (:class:`RequestRef`); it is read again when its run is
imported, so the import never holds every request of a folder at once.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ag_ui.core import RunAgentInput
from pydantic import ValidationError

from .._errors import InvalidArgument
from ..agui._wire import read_event_text

__all__ = ["RequestRef", "digest", "normalize_request"]


def digest(*parts: str) -> str:
    """Return a short hex SHA-256 of the parts (joined with NUL)."""
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class RequestRef:
    """A checked request file: where it is and the ids its run falls back on.

    Attributes:
        path: The request file (one JSON object holding ``messages``).
        thread_id: The request's ``threadId`` (``"thread"`` when it has none).
        run_id: Its ``runId`` (a deterministic ``import:<hash>`` when it has none).
    """

    path: str
    thread_id: str
    run_id: str

    def load(self) -> RunAgentInput:
        """Read and normalize the request again (it was checked when first read).

        Raises:
            InvalidArgument: If the file changed since and no longer holds a request.
        """
        try:
            text = Path(self.path).read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidArgument(f"cannot read {self.path} again: {exc}") from exc
        items = read_event_text(text).items if text.strip() else []
        if len(items) != 1 or not isinstance(items[0], dict):
            raise InvalidArgument(f"{self.path} changed during the import")
        return normalize_request(items[0], where=str(self.path))


def normalize_request(request: dict[str, Any], *, where: str = "the request") -> RunAgentInput:
    """Return a recorded request as a ``RunAgentInput``.

    Loose recorded shapes are accepted: messages without ``id`` get a deterministic one
    (``import:<position>:<hash of role and content>``) and the 0.x ``binary`` content part
    becomes an image or document part.

    Args:
        request: The decoded request object.
        where: Names the file in errors.

    Raises:
        InvalidArgument: If the request does not validate even after normalizing; the
            message names ``where`` and the fields at fault.
    """
    data = dict(request)
    data.setdefault("threadId", data.get("thread_id", "thread"))
    data.setdefault("runId", data.get("run_id", f"import:{digest(json.dumps(request))}"))
    data["messages"] = [_normalize_message(m, i) for i, m in enumerate(data.get("messages", []))]
    for name, default in (("tools", []), ("context", []), ("forwardedProps", {})):
        if name not in data and _snake(name) not in data:
            data[name] = default
    if "state" not in data:
        data["state"] = {}
    try:
        return RunAgentInput.model_validate(data)
    except ValidationError as exc:
        fields = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'request'}: {e['msg']}" for e in exc.errors()[:3]
        )
        msg = f"{where}: the recorded request is not a RunAgentInput ({fields})"
        raise InvalidArgument(msg) from exc


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _normalize_message(message: Any, position: int) -> Any:
    if not isinstance(message, dict):
        return message
    data = dict(message)
    if isinstance(data.get("content"), list):
        data["content"] = [_normalize_part(p) for p in data["content"]]
    if not data.get("id"):
        shape = json.dumps([data.get("role"), data.get("content"), data.get("toolCalls")])
        data["id"] = f"import:{position}:{digest(shape)}"
    return data


def _normalize_part(part: Any) -> Any:
    if not isinstance(part, dict) or part.get("type") != "binary":
        return part
    mime = part.get("mimeType") or part.get("mime_type") or ""
    if part.get("data") is not None:
        source = {"type": "data", "value": part["data"], "mimeType": mime}
    else:
        source = {"type": "url", "value": part.get("url") or part.get("id") or ""}
        source |= {"mimeType": mime} if mime else {}
    image = isinstance(mime, str) and mime.startswith("image/")  # else validation refuses it
    return {"type": "image" if image else "document", "source": source}
