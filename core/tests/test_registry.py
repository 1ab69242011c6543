"""Choosing a driver by URL: entry points, the pluggy hook, unknown-scheme messages (SPEC 1, 4)."""

from __future__ import annotations

import types
from importlib.metadata import entry_points
from typing import Any, ClassVar

import pluggy
import pytest

import threadkeep._registry as registry
from threadkeep import (
    InvalidArgument,
    Store,
    UnknownDriver,
    hookimpl,
    installed_schemes,
    open_store,
)
from threadkeep._memory import plugin as memory_plugin
from threadkeep._memory._store import MemoryDriver
from threadkeep._plugins import _HookSpecs


def manager_with(*plugins: object) -> pluggy.PluginManager:
    manager = pluggy.PluginManager("threadkeep")
    manager.add_hookspecs(_HookSpecs)
    for plugin in plugins:
        manager.register(plugin)
    return manager


@pytest.fixture
def only_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry sees just the in-memory driver, whatever else is installed."""
    manager = manager_with(memory_plugin)
    monkeypatch.setattr(registry, "plugin_manager", lambda: manager)


def test_memory_driver_is_registered_through_an_entry_point():
    found = {ep.name: ep.value for ep in entry_points(group="threadkeep")}
    assert found.get("memory") == "threadkeep._memory.plugin"
    assert "memory" in installed_schemes()


def test_open_store_picks_the_class_by_scheme():
    store = open_store("memory://registry-test")
    assert isinstance(store, Store)
    assert isinstance(store.driver, MemoryDriver)
    assert store.url == "memory://registry-test"
    assert not store.is_open


def test_scheme_is_case_insensitive():
    assert isinstance(open_store("MEMORY://x").driver, MemoryDriver)


@pytest.mark.usefixtures("only_memory")
def test_unknown_scheme_names_installed_schemes_and_the_package():
    with pytest.raises(UnknownDriver) as caught:
        open_store("mongodb://localhost/db")
    text = str(caught.value)
    assert "serves mongodb://;" in text
    assert "pip install threadkeep-mongodb" in text
    assert "installed: memory" in text


@pytest.mark.usefixtures("only_memory")
def test_sql_schemes_name_threadkeep_sql():
    with pytest.raises(UnknownDriver, match="pip install threadkeep-sql"):
        open_store("postgresql+asyncpg://u@h/db")


@pytest.mark.usefixtures("only_memory")
def test_a_typo_gets_a_suggestion():
    with pytest.raises(UnknownDriver, match="did you mean 'memory'") as caught:
        open_store("memroy://x")
    assert "installed: memory" in str(caught.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [("redis://localhost", "serves redis://;"), ("we ird://x", "serves 'we ird://';")],
)
def test_an_unknown_scheme_is_shown_as_a_scheme(url: str, shown: str):
    """``redis://``, not ``'redis'://``; odd text is quoted whole, so it stays visible."""
    with pytest.raises(UnknownDriver) as caught:
        open_store(url)
    assert shown in str(caught.value)


@pytest.mark.parametrize("url", ["threadkeep.db", "", "://x"])
def test_a_url_without_scheme_is_invalid(url: str):
    with pytest.raises(InvalidArgument, match="is not a URL"):
        open_store(url)


def test_a_third_party_driver_registers_like_a_builtin(monkeypatch: pytest.MonkeyPatch):
    class ThirdPartyDriver(MemoryDriver):
        schemes: ClassVar[tuple[str, ...]] = ("thirdparty",)

    plugin: Any = types.ModuleType("thirdparty_plugin")

    @hookimpl
    def threadkeep_drivers() -> list[type[Any]]:
        return [ThirdPartyDriver]

    plugin.threadkeep_drivers = threadkeep_drivers
    manager = manager_with(memory_plugin, plugin)
    monkeypatch.setattr(registry, "plugin_manager", lambda: manager)
    assert installed_schemes() == ["memory", "thirdparty"]
    assert type(open_store("thirdparty://x").driver) is ThirdPartyDriver


def test_open_store_without_url_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, isolated_settings: object
):
    monkeypatch.setenv("THREADKEEP_URL", "memory://from-env")
    assert open_store().url == "memory://from-env"
    assert open_store("memory://argument").url == "memory://argument"


def test_opening_a_scheme_imports_only_the_plugin_that_serves_it():
    """``threadkeep_schemes`` lets the registry skip other drivers' heavy imports."""
    import subprocess
    import sys

    probe = (
        "import sys, threadkeep\n"
        "threadkeep.installed_schemes()\n"
        "threadkeep.open_store('memory://')\n"
        "heavy = [m for m in ('sqlalchemy', 'pymongo', 'aiobotocore') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "", f"imported for memory://: {done.stdout.strip()}"


@pytest.mark.parametrize(
    "url", ["memory://\n", " memory://", "memory://x\x00", b"memory://", bytearray(b"memory://")]
)
def test_unclean_or_non_text_urls_are_invalid_argument(url: object) -> None:
    """Issue 12: a URL read from a file with its newline, or bytes, opens no store."""
    with pytest.raises(InvalidArgument):
        open_store(url)  # type: ignore[arg-type]


def test_an_unclean_configured_url_names_its_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THREADKEEP_URL", "memory://\n")
    with pytest.raises(InvalidArgument, match="THREADKEEP_URL"):
        open_store()
