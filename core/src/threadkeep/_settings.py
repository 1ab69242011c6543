"""Where a store's configuration comes from: arguments, environment, a settings file.

Precedence (highest first): explicit arguments, ``THREADKEEP_*`` environment variables, the
settings file (``$THREADKEEP_CONFIG``, else ``./threadkeep.toml``), then defaults. The
default store is the embedded SQLite file ``./threadkeep.db`` (SPEC section 4).
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

__all__ = ["DEFAULT_URL", "Settings", "load_settings"]

DEFAULT_URL = "sqlite+aiosqlite:///./threadkeep.db"
"""The embedded default store: a SQLite file in the working directory."""


class Settings(BaseSettings):
    """threadkeep configuration.

    Attributes:
        url: The store URL (``THREADKEEP_URL``).
        archive_url: The cold archive URL, ``s3://bucket/prefix`` or ``file:///path``
            (``THREADKEEP_ARCHIVE_URL``); reading an archived chat does not need it.
        cursor_secret: Secret that signs cursors (``THREADKEEP_CURSOR_SECRET``); without it
            the store keeps one it generated.
    """

    model_config = SettingsConfigDict(env_prefix="THREADKEEP_", extra="ignore")

    url: str = DEFAULT_URL
    archive_url: str | None = None
    cursor_secret: str | None = None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments, then environment, then the TOML settings file."""
        path = Path(os.environ.get("THREADKEEP_CONFIG", "threadkeep.toml"))
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls, path))


def load_settings(**overrides: str | None) -> Settings:
    """Return the effective settings; ``None`` overrides are ignored.

    Raises:
        pydantic.ValidationError: If the settings file is malformed.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    return Settings.model_validate(given)
