"""The read-only history viewer: one static page at ``/viewer/`` that reads the same API.

The page holds no data itself: it asks the gateway's history routes with the bearer token
the operator pastes (kept in the tab's ``sessionStorage``, or given as ``#token=...``), so
it sees exactly what that token's principal sees. Every stored text is inserted as text
(``textContent``), never as HTML.
"""

from __future__ import annotations

import base64
import hashlib
import re
from functools import cache
from importlib.resources import files

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, RedirectResponse

__all__ = ["VIEWER_PATH", "mount_viewer", "security_headers", "viewer_html"]

VIEWER_PATH = "/viewer/"
"""Where the page is served."""

_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


@cache
def viewer_html() -> str:
    """Return the viewer page (``threadkeep/http/viewer/index.html``)."""
    return (files("threadkeep.http") / "viewer" / "index.html").read_text(encoding="utf-8")


@cache
def security_headers() -> dict[str, str]:
    """Return the viewer page's response headers.

    The Content-Security-Policy allows only the page's own inline script, by its SHA-256
    (CSP Level 3, "hash-source"), so even text that reached the DOM as markup could run no
    script of its own; the page talks only to its own origin.
    """
    digests = [
        base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        for body in _SCRIPT.findall(viewer_html())
    ]
    scripts = " ".join(f"'sha256-{digest}'" for digest in digests)
    policy = (
        f"default-src 'none'; script-src {scripts}; style-src 'unsafe-inline'; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'; "
        "form-action 'none'"
    )
    return {
        "Content-Security-Policy": policy,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }


def mount_viewer(app: FastAPI) -> None:
    """Add ``GET /viewer/`` (the page) and ``GET /viewer`` (a redirect to it) to ``app``."""

    async def page() -> HTMLResponse:
        return HTMLResponse(viewer_html(), headers=security_headers())

    async def redirect() -> RedirectResponse:
        # Relative, so that it holds when the app is mounted under a prefix.
        return RedirectResponse(VIEWER_PATH.strip("/") + "/")

    app.add_api_route(VIEWER_PATH, page, methods=["GET"], include_in_schema=False)
    app.add_api_route(VIEWER_PATH.rstrip("/"), redirect, methods=["GET"], include_in_schema=False)
