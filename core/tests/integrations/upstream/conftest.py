"""The frameworks' own test files, copied unchanged but for the class they build.

Each folder holds faithful copies of one framework's tests for the interface threadkeep
implements, taken from the framework's source distribution on PyPI at the version the
integration's extra pins, with the framework's licence and origin at the top. The one change
in each copy is where the class the tests construct is imported from: a swap module in the
folder (``tk_swap_<folder>.py``) whose class has the upstream constructor and builds
threadkeep's integration at a location this conftest provides (``upstream_store``: one store
per backend and file, SQLite and PostgreSQL; ``upstream_location``, autouse: an owner of its
own per upstream database). Copied tests of the upstream class's own machinery (its
connections, locks, SQL rows, docstrings) are skipped by name, each with the reason the swap
module's ``OUT_OF_SCOPE`` gives. The folder is collected only when named on the command line
(``core/tests/integrations/conftest.py``).
"""

from __future__ import annotations

import importlib
import sys
import uuid
from collections.abc import Iterator
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


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def upstream_store(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    provision_backend: Any,
) -> Iterator[SyncStore]:
    """One store per backend for a copied test file (one migration, not one per object)."""
    folder = tmp_path_factory.mktemp(f"upstream-{request.param}")
    with provision_backend(request.param, folder) as backend, backend.sync_store() as store:
        yield store


@pytest.fixture(autouse=True)
def upstream_location(request: pytest.FixtureRequest, upstream_store: SyncStore) -> Iterator[None]:
    """Give the test's swap module fresh locations in the module's store, for this test.

    The swap calls ``current_location(key)`` and gets ``(store, user_id)``: a location is an
    owner of its own in the shared store, so objects of one key (the upstream class's database
    path: its objects on one file share a database) see each other's data and nothing else,
    and each ``None`` key (an in-memory object, which has a database of its own) gets a new one.
    """
    swap = _swap(Path(str(request.node.path)))
    if swap is None:
        yield
        return
    owners: dict[str, str] = {}

    def location_for(key: str | None) -> tuple[SyncStore, str]:
        name = key if key is not None else f":memory:{len(owners)}"
        if name not in owners:
            owners[name] = f"upstream-{uuid.uuid4().hex}"
        return upstream_store, owners[name]

    swap.current_location = location_for
    try:
        yield
    finally:
        swap.current_location = None
