"""The package's layering: no import cycle, no private reach across layers (issue 13).

The import graph is built from the source with ``ast`` (nothing is imported): one node per
module of ``core/src/threadkeep``, one edge per ``import``/``from ... import`` it runs, at
module level or inside a function (a lazy import closes a cycle just as well). Imports under
``if TYPE_CHECKING:`` are left out: they never run.
"""

from __future__ import annotations

import ast
import graphlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "core" / "src" / "threadkeep"
BACKENDS = ROOT / "backends"
EXAMPLE_DRIVER = ROOT / "docs" / "examples" / "third_party_driver"
UPPER_LAYERS = ("cli", "agui", "_importers", "http", "integrations", "sync")


def _modules() -> dict[str, tuple[Path, bool]]:
    """Map each module's dotted name to its file and whether it is a package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Yield every import statement that can run, at any depth, skipping TYPE_CHECKING."""
    for node in body:
        if isinstance(node, ast.If) and _type_checking_only(node):
            yield from _imports(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                yield from _imports([child])
            elif isinstance(child, ast.ExceptHandler | ast.match_case):
                yield from _imports(child.body)


def _targets(node: ast.Import | ast.ImportFrom, package: str, modules: set[str]) -> list[str]:
    """The dotted names an import statement loads (a name imported from a package that is
    one of its submodules counts as that submodule)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = package.split(".")
        base = base[: len(base) - (node.level - 1)]
        source = ".".join([*base, *([node.module] if node.module else [])])
    else:
        source = node.module or ""
    return [
        f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
        for alias in node.names
    ]


def import_graph() -> dict[str, set[str]]:
    """Return ``{module: {modules it imports}}`` for every module of the package."""
    modules = _modules()
    names = set(modules)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8")).body):
            for imported in _targets(node, package, names):
                target = imported
                while target not in names and "." in target:
                    target = target.rpartition(".")[0]  # a name defined in that module
                if target in names and target != name:
                    graph[name].add(target)
    return graph


def test_the_graph_sees_the_package() -> None:
    graph = import_graph()
    assert len(graph) > 100
    assert "threadkeep._store_run_batch" in graph["threadkeep._store"]
    assert "threadkeep._errors" in graph["threadkeep._store_core"]


def test_a_cycle_is_found() -> None:
    """The checker itself: a graph with a cycle fails it."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    with pytest.raises(graphlib.CycleError):
        tuple(graphlib.TopologicalSorter(graph).static_order())


def test_the_package_has_no_import_cycle() -> None:
    try:
        tuple(graphlib.TopologicalSorter(import_graph()).static_order())
    except graphlib.CycleError as exc:
        cycle = " -> ".join(exc.args[1])
        pytest.fail(f"import cycle in core/src/threadkeep: {cycle}")


_PRIVATE_STORE_CALL = re.compile(r"\bstore\._[a-z]\w*")


@pytest.mark.parametrize("layer", UPPER_LAYERS)
def test_upper_layers_use_the_public_store_api(layer: str) -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _PRIVATE_STORE_CALL.search(line)
    ]
    assert not offenders, "\n".join(offenders)


def test_backends_import_only_public_core_modules() -> None:
    private = re.compile(r"^\s*(from|import)\s+threadkeep\._", re.MULTILINE)
    offenders = [
        str(path.relative_to(ROOT))
        for path in sorted([*BACKENDS.glob("*/src/**/*.py"), *EXAMPLE_DRIVER.glob("src/**/*.py")])
        if private.search(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, offenders


def test_store_is_one_final_facade() -> None:
    """``Store`` holds a driver; it is not a tower of mixins (issue 13)."""
    from threadkeep import Store

    assert Store.__mro__ == (Store, object)
    with pytest.raises(TypeError, match="Store is final"):
        type("Sub", (Store,), {})


def _classes(path: Path) -> Iterator[ast.ClassDef]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef):
            yield node


def test_no_backend_class_subclasses_store() -> None:
    """No class of a backend package, the example driver or the memory driver names
    ``Store`` (or a ``*Store`` factory) as a base: drivers are held, never subclassed."""
    sources = [
        *BACKENDS.glob("*/src/**/*.py"),
        *EXAMPLE_DRIVER.glob("src/**/*.py"),
        *(PACKAGE / "_memory").glob("*.py"),
    ]
    offenders = [
        f"{path.relative_to(ROOT)}: class {node.name}"
        for path in sorted(sources)
        for node in _classes(path)
        for base in node.bases
        if (isinstance(base, ast.Name) and base.id.endswith("Store"))
        or (isinstance(base, ast.Attribute) and base.attr.endswith("Store"))
    ]
    assert not offenders, offenders


def test_no_loaded_driver_class_is_a_store() -> None:
    """The same at run time, for every driver the installed plugins serve."""
    from threadkeep import Store, installed_schemes
    from threadkeep._registry import driver_class_for

    for scheme in installed_schemes():
        driver = driver_class_for(f"{scheme}://x")
        assert not issubclass(driver, Store), driver


def test_the_driver_protocol_is_small() -> None:
    from threadkeep.driver import Driver, protocol_members

    members = protocol_members(Driver)
    assert len(members) <= 15, members
    assert all(not name.startswith("_") for name in members)
