"""Who is calling: principals, authenticators and the bearer-JWT authenticator.

Every request to the gateway is authenticated (issue 17, "Authentication and access control
are not optional"). An :data:`Authenticator` is an async callable that takes the request and
returns the caller's :class:`Principal`, or ``None`` when the request carries no valid
credentials (the gateway then answers 401). :class:`JWTAuthenticator` is the built-in one:
bearer JWTs verified with PyJWT against a key or a JWKS endpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
import jwt
from starlette.requests import HTTPConnection

from .._errors import InvalidArgument
from .._paging import Viewer
from ._errors import ApiError

__all__ = [
    "JWT_SECRET_ENV",
    "Authenticator",
    "JWTAuthenticator",
    "Principal",
    "bearer_token",
]

JWT_SECRET_ENV = "THREADKEEP_JWT_SECRET"  # noqa: S105 - a variable name, not a secret
"""Environment variable holding the shared HS256 secret ``threadkeep serve`` verifies with."""

_log = logging.getLogger("threadkeep.http")

_MIN_SECRET_BYTES = 32
"""RFC 7518 section 3.2: an HS256 key must be at least as long as the hash (32 bytes)."""


@dataclass(frozen=True)
class Principal:
    """The authenticated caller.

    Attributes:
        user_id: The person (non-empty); they see the chats they own.
        tenant_id: Their tenant, or ``None`` (a tenant of its own); tenants never mix.
        teams: The teams they belong to, in the token's order; they also see chats shared
            with any of these teams (``share == "team"``) in their tenant.
    """

    user_id: str
    tenant_id: str | None = None
    teams: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not isinstance(self.user_id, str) or not self.user_id:
            raise InvalidArgument("a principal's user_id must be a non-empty string")
        if self.tenant_id is not None and not isinstance(self.tenant_id, str):
            raise InvalidArgument("a principal's tenant_id must be a string or None")
        if not all(isinstance(team, str) and team for team in self.teams):
            raise InvalidArgument("a principal's teams must be non-empty strings")

    def viewers(self) -> list[Viewer]:
        """Return the store :class:`Viewer` of each team (one without a team if none).

        The store's access checks take one team per viewer; a chat is visible to the
        principal when it is visible to any of these.
        """
        teams: Sequence[str | None] = self.teams or (None,)
        return [Viewer(user_id=self.user_id, team_id=t, tenant_id=self.tenant_id) for t in teams]


Authenticator = Callable[[HTTPConnection], Awaitable[Principal | None]]
"""An async callable: the request in, its :class:`Principal` out, or ``None`` for no valid
credentials (answered 401). It may raise ``InvalidArgument`` for malformed credentials (also
401); any other exception is a server error."""


def bearer_token(connection: HTTPConnection) -> str | None:
    """Return the token of an ``Authorization: Bearer <token>`` header, or ``None``."""
    header = connection.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


class JWTAuthenticator:
    """Verify bearer JWTs with PyJWT and read the principal from their claims.

    Args:
        key: The verification key: a shared secret (HS256, at least 32 bytes) or a PEM
            public key. Exactly one of ``key`` and ``jwks_url`` is given.
        jwks_url: A JWKS endpoint; the key whose ``kid`` the token names is fetched (and
            cached) with ``jwt.PyJWKClient``.
        algorithms: Accepted algorithms (default ``["HS256"]`` with ``key`` as ``str`` or
            ``bytes`` secret, else ``["RS256", "ES256"]``). ``none`` is never accepted.
        issuer: Required ``iss`` value, or ``None`` to not check it.
        audience: Required ``aud`` value(s), or ``None`` to not check it.
        leeway: Clock skew allowed on ``exp``/``nbf``/``iat``, in seconds (default 30).
        user_claim: The claim naming the user (default ``sub``).
        tenant_claim: The claim naming the tenant (default ``tenant``; absent means none).
        teams_claim: The claim listing the teams (default ``teams``: a list of strings or
            one string; absent means none).

    Raises:
        InvalidArgument: If neither or both of ``key`` and ``jwks_url`` are given, a
            shared secret is shorter than 32 bytes, ``leeway`` is negative, or
            ``algorithms`` is empty or names ``none``.
    """

    def __init__(
        self,
        *,
        key: str | bytes | None = None,
        jwks_url: str | None = None,
        algorithms: Sequence[str] | None = None,
        issuer: str | None = None,
        audience: str | Sequence[str] | None = None,
        leeway: float = 30.0,
        user_claim: str = "sub",
        tenant_claim: str = "tenant",
        teams_claim: str = "teams",
    ) -> None:
        if (key is None) == (jwks_url is None):
            raise InvalidArgument("give exactly one of key= and jwks_url=")
        chosen = list(algorithms) if algorithms else _default_algorithms(key)
        if not chosen or any(a.lower() == "none" for a in chosen):
            raise InvalidArgument("algorithms must be non-empty and must not include 'none'")
        if any(a.startswith("HS") for a in chosen) and key is not None:
            secret = key.encode() if isinstance(key, str) else key
            if b"-----BEGIN" not in secret and len(secret) < _MIN_SECRET_BYTES:
                msg = f"an HS256 secret must be at least {_MIN_SECRET_BYTES} bytes (RFC 7518)"
                raise InvalidArgument(msg)
        if leeway < 0:
            raise InvalidArgument(f"leeway is seconds >= 0, not {leeway!r}")
        self._key = key
        self._jwks = jwt.PyJWKClient(jwks_url) if jwks_url is not None else None
        self.algorithms = chosen
        self.issuer = issuer
        self.audience = audience
        self.leeway = leeway
        self.claims = (user_claim, tenant_claim, teams_claim)

    @classmethod
    def from_secret(cls, secret: str | bytes, **options: Any) -> JWTAuthenticator:
        """Return an HS256 authenticator for a shared secret (``--jwt-secret``).

        Raises:
            InvalidArgument: As the constructor.
        """
        return cls(key=secret, algorithms=["HS256"], **options)

    async def __call__(self, connection: HTTPConnection) -> Principal | None:
        """Return the principal of the request's bearer token, or ``None`` if it has none.

        Raises:
            InvalidArgument: If the token is malformed, expired, not yet valid, signed
                with another key, or for another issuer or audience, or its claims do not
                name a user (the gateway answers all of these 401).
            ApiError: 503 ``auth_unavailable`` if the ``jwks_url`` endpoint cannot be
                reached (the driver's text goes to the log only).
        """
        token = bearer_token(connection)
        if token is None:
            return None
        key = await self._signing_key(token)
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=self.algorithms,
                issuer=self.issuer,
                audience=self.audience,
                leeway=self.leeway,
                options={"require": ["exp"], "verify_aud": self.audience is not None},
            )
        except jwt.PyJWTError as exc:
            raise InvalidArgument(f"bearer token rejected: {exc}") from exc
        return self._principal(claims)

    async def _signing_key(self, token: str) -> Any:
        if self._jwks is None:
            return self._key
        try:  # PyJWKClient fetches over blocking urllib: keep the event loop free
            found = await anyio.to_thread.run_sync(self._jwks.get_signing_key_from_jwt, token)
        except jwt.PyJWKClientConnectionError as exc:
            # The issuer's keys cannot be fetched: an outage to retry, not bad credentials.
            _log.warning("threadkeep: the JWKS endpoint cannot be reached: %s", exc)
            raise ApiError(
                503, "auth_unavailable", "the token issuer's keys cannot be fetched; retry later"
            ) from exc
        except jwt.PyJWTError as exc:
            raise InvalidArgument(f"bearer token rejected: {exc}") from exc
        return found.key

    def _principal(self, claims: dict[str, Any]) -> Principal:
        user_claim, tenant_claim, teams_claim = self.claims
        user = claims.get(user_claim)
        tenant = claims.get(tenant_claim)
        teams = claims.get(teams_claim) or ()
        if isinstance(teams, str):
            teams = (teams,)
        if not isinstance(user, str) or not user:
            raise InvalidArgument(f"bearer token has no {user_claim!r} claim naming the user")
        if tenant is not None and not isinstance(tenant, str):
            raise InvalidArgument(f"bearer token's {tenant_claim!r} claim is not a string")
        if not isinstance(teams, list | tuple) or not all(isinstance(t, str) for t in teams):
            raise InvalidArgument(f"bearer token's {teams_claim!r} claim is not a string list")
        return Principal(user, tenant, tuple(t for t in teams if t))


def _default_algorithms(key: str | bytes | None) -> list[str]:
    if key is None:
        return ["RS256", "ES256"]
    text = key.decode(errors="replace") if isinstance(key, bytes) else key
    return ["RS256", "ES256"] if "-----BEGIN" in text else ["HS256"]
