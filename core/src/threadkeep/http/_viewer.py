"""The read-only history viewer: one static page at ``/viewer/`` that reads the same API.

The page holds no data itself: it asks the gateway's history routes with the bearer token
the operator pastes (kept in the tab's ``sessionStorage``, or given as ``#token=...``), so
it sees exactly what that token's principal sees. Every stored text is inserted as text
(``textContent``), never as HTML.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, RedirectResponse

__all__ = ["VIEWER_PATH", "mount_viewer", "viewer_html"]

VIEWER_PATH = "/viewer/"
"""Where the page is served."""

_SECURITY_HEADERS = {
    # The page runs only its own script and talks only to its own origin.
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


@cache
def viewer_html() -> str:
    """Return the viewer page (``threadkeep/http/viewer/index.html``)."""
    return (files("threadkeep.http") / "viewer" / "index.html").read_text(encoding="utf-8")


def mount_viewer(app: FastAPI) -> None:
    """Add ``GET /viewer/`` (the page) and ``GET /viewer`` (a redirect to it) to ``app``."""

    async def page() -> HTMLResponse:
        return HTMLResponse(viewer_html(), headers=_SECURITY_HEADERS)

    async def redirect() -> RedirectResponse:
        return RedirectResponse(VIEWER_PATH)

    app.add_api_route(VIEWER_PATH, page, methods=["GET"], include_in_schema=False)
    app.add_api_route(VIEWER_PATH.rstrip("/"), redirect, methods=["GET"], include_in_schema=False)
