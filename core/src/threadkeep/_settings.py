"""Where a store's configuration comes from: arguments, environment, a settings file.

Precedence (highest first): explicit arguments, ``THREADKEEP_*`` environment variables, the
settings file (``$THREADKEEP_CONFIG``, else ``./threadkeep.toml``), then defaults. The
default store is the embedded SQLite file ``./threadkeep.db``.

The settings file is TOML with top-level keys only (``url``, ``archive_url``,
``cursor_secret``). A file named by ``THREADKEEP_CONFIG`` must exist; ``./threadkeep.toml``
is optional. An unknown key, a value of the wrong type or malformed TOML is an error that
names the file (and the line, or the valid keys).
"""

from __future__ import annotations

import difflib
import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from ._errors import InvalidArgument

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_CONFIG_FILE",
    "DEFAULT_URL",
    "Settings",
    "load_settings",
    "setting_source",
]

DEFAULT_URL = "sqlite+aiosqlite:///./threadkeep.db"
"""The embedded default store: a SQLite file in the working directory."""

CONFIG_ENV = "THREADKEEP_CONFIG"
"""The environment variable naming the settings file."""

DEFAULT_CONFIG_FILE = "threadkeep.toml"
"""The settings file read from the working directory when ``THREADKEEP_CONFIG`` is unset."""


def _config_path() -> tuple[Path, bool]:
    """Return the settings file's path and whether it was named explicitly."""
    named = os.environ.get(CONFIG_ENV)
    return (Path(named), True) if named else (Path(DEFAULT_CONFIG_FILE), False)


class _TomlFile(PydanticBaseSettingsSource):
    """The settings file, checked: it must parse and hold only known keys."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls)
        self.path, self.named = _config_path()

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """Unused: :meth:`__call__` returns the whole file at once."""
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        try:
            text = self.path.read_bytes()
        except FileNotFoundError as exc:
            if not self.named:
                return {}
            msg = f"settings file {self.path} (from {CONFIG_ENV}) does not exist"
            raise InvalidArgument(msg + f"; create it or unset {CONFIG_ENV}") from exc
        except OSError as exc:
            raise InvalidArgument(f"cannot read settings file {self.path}: {exc}") from exc
        try:
            document = text.decode("utf-8-sig")
            data = tomllib.loads(document)
        except UnicodeDecodeError as exc:
            msg = f"settings file {self.path} is not UTF-8 text (byte {exc.start})"
            raise InvalidArgument(msg) from exc
        except tomllib.TOMLDecodeError as exc:
            lines = len(document.rstrip("\n").split("\n"))
            where = str(exc).replace("(at end of document)", f"(at the end, line {lines})")
            raise InvalidArgument(f"settings file {self.path} is not valid TOML: {where}") from exc
        valid = sorted(self.settings_cls.model_fields)
        for key in data:
            if key not in valid:
                close = difflib.get_close_matches(key, valid, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                msg = (
                    f"settings file {self.path}: unknown key {key!r}{hint}; "
                    f"valid keys: {', '.join(valid)}"
                )
                raise InvalidArgument(msg)
        return data


class Settings(BaseSettings):
    """threadkeep configuration.

    Attributes:
        url: The store URL (``THREADKEEP_URL``).
        archive_url: The cold archive URL, ``s3://bucket/prefix`` or ``file:///path``
            (``THREADKEEP_ARCHIVE_URL``); reading an archived chat does not need it.
        cursor_secret: Secret that signs cursors, at least 16 bytes of UTF-8
            (``THREADKEEP_CURSOR_SECRET``); without it the store keeps one it generated.
        auto_migrate: Whether opening a store may upgrade its schema
            (``THREADKEEP_AUTO_MIGRATE``, default true). False for an application user that
            may not run DDL: upgrade with ``threadkeep migrate``.
    """

    model_config = SettingsConfigDict(env_prefix="THREADKEEP_", extra="ignore")

    url: str = DEFAULT_URL
    archive_url: str | None = None
    cursor_secret: str | None = None
    auto_migrate: bool = True

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
        return (init_settings, env_settings, _TomlFile(settings_cls))


def load_settings(**overrides: str | None) -> Settings:
    """Return the effective settings; ``None`` overrides are ignored.

    Args:
        **overrides: Values that win over the environment and the file (``url=...``).

    Returns:
        The settings.

    Raises:
        InvalidArgument: If the settings file named by ``THREADKEEP_CONFIG`` is missing, the
            file is not valid TOML (the message names the file and line), holds an unknown
            key (the message lists the valid ones), or a value has the wrong type.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings.model_validate(given)
    except ValidationError as exc:
        first = exc.errors()[0]
        raised = first.get("ctx", {}).get("error")
        if isinstance(raised, InvalidArgument):  # the settings file's own check
            raise InvalidArgument(str(raised)) from raised
        key = ".".join(str(part) for part in first["loc"]) or "settings"
        path, _ = _config_path()
        env = f"THREADKEEP_{key.upper()}"
        msg = f"invalid setting {key!r} (from an argument, {env} or {path}): {first['msg']}"
        raise InvalidArgument(msg) from exc


def setting_source(key: str) -> str:
    """Return where the effective value of setting ``key`` came from, for error messages.

    Arguments are not seen here: call it for a value that came from :func:`load_settings`
    without an override.

    Args:
        key: A :class:`Settings` field name, for example ``"cursor_secret"``.

    Returns:
        ``"THREADKEEP_<KEY>"`` when that variable is set, else ``"<key> in <settings file>"``.
    """
    env = f"THREADKEEP_{key.upper()}"
    if os.environ.get(env) is not None:
        return env
    path, _ = _config_path()
    return f"{key} in the settings file {path}"
