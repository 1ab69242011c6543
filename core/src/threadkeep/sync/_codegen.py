"""Generate ``_methods.py``: one blocking method per public coroutine method of ``Store``.

The sync API is derived from the async one, never written by hand, so the two cannot drift
(the idea of httpx's ``Client``/``AsyncClient`` pair, generated as ``unasync`` does). For each
public ``async def`` of :class:`threadkeep.Store` except :data:`HAND_WRITTEN` (written by hand in
``_store.py``), the generated method has the same parameters, defaults and annotations as
the source text, the same docstring, and returns what the coroutine returns::

    def get_chat(self, chat_id: UUID | str, *, viewer: ... = None) -> Chat:
        \"\"\"<the async method's docstring>\"\"\"
        return self._run(self._store.get_chat(chat_id, viewer=viewer))

Run ``python -m threadkeep.sync._codegen`` after changing the async ``Store`` API; the test
``core/tests/integrations/test_sync_api.py`` fails while ``_methods.py`` is stale. Needs ruff (a dev
dependency) to format the output like the rest of the code base.
"""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["HAND_WRITTEN", "TARGET", "async_api", "generate", "main"]

TARGET = Path(__file__).with_name("_methods.py")
"""The generated module."""

HAND_WRITTEN = frozenset({"open", "close", "load_messages"})
"""Coroutine methods the sync store implements itself: ``open``/``close`` start and stop its
loop; ``load_messages`` advances a sync iterator off the loop thread."""

_HEADER = '''"""Blocking methods of ``SyncStore``, generated from ``threadkeep.Store``: do not edit.

Regenerate with ``python -m threadkeep.sync._codegen`` after the async API changes.
"""

from __future__ import annotations

'''


def async_api() -> dict[str, Callable[..., Any]]:
    """Return ``{name: coroutine function}`` of ``Store``'s public coroutine methods, by name.

    ``open`` and ``close`` are included; :data:`HAND_WRITTEN` says which are generated.
    """
    from threadkeep import Store

    found: dict[str, Callable[..., Any]] = {}
    for name in sorted(dir(Store)):
        member = getattr(Store, name)
        if not name.startswith("_") and inspect.iscoroutinefunction(member):
            found[name] = member
    return found


def _function_node(function: Callable[..., Any]) -> ast.AsyncFunctionDef:
    source = textwrap.dedent(inspect.getsource(function))
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.AsyncFunctionDef), function
    return node


def _module_imports(module_name: str) -> dict[str, tuple[str, str]]:
    """Map each name a module imports (``TYPE_CHECKING`` blocks too) to (module, name)."""
    module = sys.modules[module_name]
    tree = ast.parse(inspect.getsource(module))
    package = module_name.rpartition(".")[0]
    names: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                source = f"{base}.{source}" if source else base
            for alias in node.names:
                names[alias.asname or alias.name] = (source, alias.name)
    return names


def _used_names(node: ast.AsyncFunctionDef) -> Iterator[str]:
    parts: list[ast.AST] = [node.args]
    if node.returns is not None:
        parts.append(node.returns)
    for part in parts:
        for child in ast.walk(part):
            if isinstance(child, ast.Name):
                yield child.id
            elif isinstance(child, ast.Constant) and isinstance(child.value, str):
                # a quoted annotation: the names inside it count as well
                for inner in ast.walk(ast.parse(child.value, mode="eval")):
                    if isinstance(inner, ast.Name):
                        yield inner.id


def _import_for(name: str, function: Callable[..., Any]) -> tuple[str, str] | None:
    """Return the (module, name) to import ``name`` from, or ``None`` for a builtin."""
    import builtins

    import threadkeep
    import threadkeep.typing

    for public in (threadkeep, threadkeep.typing):
        if name in public.__all__:
            return (public.__name__, name)
    imported = _module_imports(function.__module__).get(name)
    if imported is not None:
        return imported
    if hasattr(builtins, name):
        return None
    return (function.__module__, name)


def _forwarding(args: ast.arguments) -> str:
    """The call arguments that pass each parameter on as it was declared."""
    passed = [arg.arg for arg in (*args.posonlyargs, *args.args)][1:]  # drop self
    if args.vararg is not None:
        passed.append(f"*{args.vararg.arg}")
    passed += [f"{arg.arg}={arg.arg}" for arg in args.kwonlyargs]
    if args.kwarg is not None:
        passed.append(f"**{args.kwarg.arg}")
    return ", ".join(passed)


def _method(name: str, function: Callable[..., Any]) -> str:
    node = _function_node(function)
    doc = inspect.getdoc(function) or ""
    quote = 'r"""' if "\\" in doc else '"""'
    body_doc = textwrap.indent(f'{quote}{doc}\n"""', " " * 8).lstrip()
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    return (
        f"    def {name}({ast.unparse(node.args)}){returns}:\n"
        f"        {body_doc}\n"
        f"        return self._run(self._store.{name}({_forwarding(node.args)}))\n"
    )


def _ruff(*args: str, code: str) -> str:
    result = subprocess.run(  # noqa: S603 - our own ruff, fixed arguments
        [sys.executable, "-m", "ruff", *args, "--stdin-filename", str(TARGET), "-"],
        input=code,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def generate() -> str:
    """Return the text of ``_methods.py`` for the installed ``Store``, formatted by ruff.

    Raises:
        subprocess.CalledProcessError: If ruff is missing or rejects the generated code.
    """
    api = {name: fn for name, fn in async_api().items() if name not in HAND_WRITTEN}
    imports: dict[str, set[str]] = {"typing": {"TYPE_CHECKING", "Any", "TypeVar"}}
    for function in api.values():
        for used in _used_names(_function_node(function)):
            found = _import_for(used, function)
            if found is not None:
                imports.setdefault(found[0], set()).add(found[1])
    imports.setdefault("threadkeep", set()).add("Store")
    lines = [_HEADER]
    lines += [f"from {m} import {', '.join(sorted(n))}" for m, n in sorted(imports.items())]
    lines += [
        "",
        "if TYPE_CHECKING:",
        "    from collections.abc import Coroutine",
        "",
        '__all__ = ["SyncMethods"]',
        "",
        '_T = TypeVar("_T")',
        "",
        "",
        "class SyncMethods:",
        '    """The blocking twin of every public coroutine method of ``threadkeep.Store``."""',
        "",
        "    _store: Store",
        "",
        "    def _run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:",
        '        """Run ``coroutine`` on the store\'s loop and return its result (blocking)."""',
        "        raise NotImplementedError  # SyncStore provides it",
        "",
    ]
    code = "\n".join(lines) + "\n" + "\n".join(_method(n, f) for n, f in api.items())
    code = _ruff("check", "--fix", "--select", "I,F401", "--quiet", "--exit-zero", code=code)
    return _ruff("format", "--quiet", code=code)


def main() -> None:
    """Write :data:`TARGET` (``python -m threadkeep.sync._codegen``)."""
    TARGET.write_text(generate(), encoding="utf-8")
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
