"""``threadkeep serve``: the HTTP gateway and the history viewer on uvicorn.

Authentication is never off. The authenticator is, in this order: ``--auth MODULE:NAME``
(your async callable ``request -> Principal | None``), a JWT key (``--jwks-url``,
``--jwt-public-key FILE`` or the shared HS256 ``--jwt-secret`` / ``$THREADKEEP_JWT_SECRET``,
with ``--jwt-issuer``, ``--jwt-audience``, ``--jwt-leeway``). With none of these, ``serve``
starts only on a loopback host: it signs with a one-off random secret and prints a viewer
link holding a token for ``--token-user`` (an operator's local look at a store). On any other
host it refuses to start (exit status 2).
"""

from __future__ import annotations

import importlib
import ipaddress
import secrets
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from ._app import EXIT_USAGE, CliError, UrlOption, resolve_url

__all__ = ["is_loopback", "load_object", "register", "serve"]

_HostOption = Annotated[
    str, typer.Option("--host", help="Interface to listen on; non-loopback needs an authenticator.")
]


def is_loopback(host: str) -> bool:
    """Return whether ``host`` is ``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def load_object(spec: str, option: str) -> Any:
    """Import ``MODULE:NAME`` (``NAME`` may be dotted) and return the object.

    Raises:
        CliError: (exit status 2) If ``spec`` is not ``MODULE:NAME`` or cannot be imported.
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise CliError(f"{option} takes MODULE:NAME, not {spec!r}", exit_code=EXIT_USAGE)
    try:
        found: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise CliError(f"{option} {spec!r} cannot be loaded: {exc}", exit_code=EXIT_USAGE) from exc
    return found


def serve(
    *,
    url: UrlOption = None,
    host: _HostOption = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="TCP port.")] = 8000,
    auth: Annotated[
        str | None,
        typer.Option("--auth", help="MODULE:NAME of an async callable request -> Principal."),
    ] = None,
    jwt_secret: Annotated[
        str | None,
        typer.Option(
            "--jwt-secret",
            envvar="THREADKEEP_JWT_SECRET",
            help="Shared HS256 secret (32+ bytes) the bearer tokens are signed with.",
            show_default=False,
        ),
    ] = None,
    jwks_url: Annotated[
        str | None, typer.Option("--jwks-url", help="JWKS endpoint of the token issuer.")
    ] = None,
    jwt_public_key: Annotated[
        Path | None,
        typer.Option("--jwt-public-key", help="PEM public key (RS256/ES256) tokens verify with."),
    ] = None,
    jwt_issuer: Annotated[
        str | None, typer.Option("--jwt-issuer", help="Required iss claim.")
    ] = None,
    jwt_audience: Annotated[
        str | None, typer.Option("--jwt-audience", help="Required aud claim.")
    ] = None,
    jwt_leeway: Annotated[
        float, typer.Option("--jwt-leeway", min=0, help="Clock skew allowed, in seconds.")
    ] = 30.0,
    agent: Annotated[
        str | None,
        typer.Option("--agent", help="MODULE:NAME of agent_id -> AG-UI agent, for the run route."),
    ] = None,
    token_user: Annotated[
        str, typer.Option("--token-user", help="Without an authenticator: the local token's user.")
    ] = "local",  # noqa: S107 - a user id, not a password
    token_tenant: Annotated[
        str | None,
        typer.Option("--token-tenant", help="Without an authenticator: the local token's tenant."),
    ] = None,
    on_error: Annotated[
        str,
        typer.Option("--on-error", help="An errored run: keep what it delivered, or discard it."),
    ] = "keep",
    write_policy: Annotated[
        str, typer.Option("--write-policy", help="Run writes: incremental or buffered.")
    ] = "incremental",
    viewer: Annotated[bool, typer.Option("--viewer/--no-viewer", help="Serve /viewer/.")] = True,
    max_body_bytes: Annotated[
        int | None,
        typer.Option(
            "--max-body-bytes",
            min=1,
            help="Largest request body accepted, in bytes (default 64 MiB); larger: 413.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Serve the HTTP gateway (and the history viewer at /viewer/) with uvicorn."""
    import uvicorn

    from ..http import JWTAuthenticator, create_app

    store_url = resolve_url(url)
    options: dict[str, Any] = {
        "issuer": jwt_issuer,
        "audience": jwt_audience,
        "leeway": jwt_leeway,
    }
    if auth is not None:
        authenticator = load_object(auth, "--auth")
        if not callable(authenticator):
            raise CliError(f"--auth {auth!r} is not callable", exit_code=EXIT_USAGE)
    elif jwks_url is not None:
        authenticator = JWTAuthenticator(jwks_url=jwks_url, **options)
    elif jwt_public_key is not None:
        try:
            pem = jwt_public_key.read_bytes()
        except OSError as exc:
            msg = f"--jwt-public-key {jwt_public_key}: {exc.strerror}"
            raise CliError(msg, exit_code=EXIT_USAGE) from exc
        authenticator = JWTAuthenticator(key=pem, **options)
    elif jwt_secret:
        authenticator = JWTAuthenticator.from_secret(jwt_secret, **options)
    else:
        authenticator = _local_authenticator(host, port, token_user, token_tenant)
    agents = None if agent is None else load_object(agent, "--agent")
    if agents is not None and not callable(agents):
        agents = getattr(agents, "get", None)
        if agents is None:
            raise CliError("--agent names neither a callable nor a mapping", exit_code=EXIT_USAGE)
    limits: dict[str, Any] = {} if max_body_bytes is None else {"max_body_bytes": max_body_bytes}
    app = create_app(
        url=store_url,
        authenticator=authenticator,
        agents=agents,
        run_options={"on_error": on_error, "write_policy": write_policy},
        viewer=viewer,
        **limits,
    )
    typer.echo(f"threadkeep: serving {_redacted(store_url)} on http://{host}:{port}", err=True)
    uvicorn.run(app, host=host, port=port, log_level="info", proxy_headers=False)


def _local_authenticator(host: str, port: int, user: str, tenant: str | None) -> Any:
    """A one-off secret for a loopback-only operator session; prints the viewer link."""
    import jwt

    from ..http import JWTAuthenticator

    if not is_loopback(host):
        msg = (
            f"refusing to serve on {host!r} without an authenticator: give --jwt-secret "
            "(or $THREADKEEP_JWT_SECRET), --jwks-url, --jwt-public-key or --auth"
        )
        raise CliError(msg, exit_code=EXIT_USAGE)
    secret = secrets.token_urlsafe(48)
    claims = {"sub": user, "tenant": tenant, "exp": int(time.time()) + 12 * 3600}
    token = jwt.encode(claims, secret, algorithm="HS256")
    typer.echo(
        "threadkeep: no authenticator given; loopback only, tokens signed with a one-off "
        f"secret. Viewer (user {user!r}, 12 h): http://{host}:{port}/viewer/#token={token}",
        err=True,
    )
    typer.echo(f"THREADKEEP_TOKEN={token}")
    return JWTAuthenticator.from_secret(secret)


def _redacted(url: str) -> str:
    """``url`` without a password (``user:***@host``)."""
    scheme, sep, rest = url.partition("://")
    credentials, at, location = rest.rpartition("@")
    if not sep or not at or ":" not in credentials:
        return url
    return f"{scheme}://{credentials.split(':', 1)[0]}:***@{location}"


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the root app."""
    app.command(name="serve")(serve)
