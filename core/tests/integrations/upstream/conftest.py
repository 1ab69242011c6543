"""The frameworks' own test files, copied unchanged but for the class they build.

Each folder holds faithful copies of one framework's tests for the interface threadkeep
implements, taken from the framework's source distribution on PyPI at the version the
integration's extra pins, with the framework's licence and origin at the top. The one change
in each copy is where the class the tests construct is imported from: a swap module in the
folder (``tk_swap_<folder>.py``) whose class has the upstream constructor and builds
threadkeep's integration on stores this conftest provides, on SQLite and on PostgreSQL
(``upstream_location``, autouse). Copied tests of the upstream class's own machinery (its
connections, locks, SQL rows, docstrings) are skipped by name, each with the reason the swap
module's ``OUT_OF_SCOPE`` gives. The folder is collected only when named on the command line
(``core/tests/integrations/conftest.py``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from threadkeep.sync import SyncStore

HERE = Path(__file__).parent
FOLDERS = sorted(p for p in HERE.iterdir() if (p / f"tk_swap_{p.name}.py").exists())

# The copies import their swap module by name (`--import-mode=importlib` gives test files no
# package to import from): each framework folder is put on sys.path once.
for _folder in FOLDERS:
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))


def _swap(path: Path) -> ModuleType | None:
    folder = path.parent
    if folder.parent != HERE or folder not in FOLDERS:
        return None
    return importlib.import_module(f"tk_swap_{folder.name}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip the copied tests that are out of scope, each with its swap module's reason."""
    for item in items:
        swap = _swap(Path(str(item.path)))
        if swap is None:
            continue
        reason = swap.OUT_OF_SCOPE.get(getattr(item, "originalname", item.name))
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"out of scope: {reason}"))


@pytest.fixture(autouse=True, params=["sqlite", "postgresql"])
def upstream_location(
    request: pytest.FixtureRequest, tmp_path: Path, provision_backend: Any
) -> Iterator[None]:
    """Give the test's swap module fresh stores on one backend, for this test.

    The swap calls ``current_store(key)``: one store per distinct key (the upstream class's
    database path: its objects on one file share a database), a new one for each ``None``
    (an in-memory object has its own); all are closed and dropped after the test.
    """
    swap = _swap(Path(str(request.node.path)))
    if swap is None:
        yield
        return
    with ExitStack() as stack:
        stores: dict[str, SyncStore] = {}

        def store_for(key: str | None) -> SyncStore:
            name = key if key is not None else f":memory:{len(stores)}"
            if name not in stores:
                folder = tmp_path / f"location-{len(stores)}"
                folder.mkdir()
                # The copies build their objects inside async tests too: provisioning (which
                # runs its own event loop for PostgreSQL) runs on a thread of its own.
                with ThreadPoolExecutor(1) as worker:
                    backend = worker.submit(
                        stack.enter_context, provision_backend(request.param, folder)
                    ).result()
                stores[name] = stack.enter_context(backend.sync_store())
            return stores[name]

        swap.current_store = store_for
        try:
            yield
        finally:
            swap.current_store = None
