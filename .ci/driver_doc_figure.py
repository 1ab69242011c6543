"""Check or write the test figure docs/writing-a-driver.md quotes for the example driver.

The guide shows the summary line of the example driver's contract run (``115 passed, 10
skipped``). The figure is not typed by hand: CI runs the example's tests in a fresh venv
(``run_extra_checks`` in ``.ci/run``), saves pytest's output, and this script compares the
run's counts with the guide's. A mismatch fails CI and prints the command that writes the
run's figure into the guide.

Usage::

    python3 .ci/driver_doc_figure.py PYTEST_OUTPUT           # check (exit 1 on a mismatch)
    python3 .ci/driver_doc_figure.py PYTEST_OUTPUT --write   # write the figure into the guide

Standard library only (CI runs it with the machine's python3).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

__all__ = ["DOC", "doc_figure", "main", "run_figure", "summary_line", "write_figure"]

DOC = Path(__file__).resolve().parents[1] / "docs" / "writing-a-driver.md"
"""The guide whose example run this script keeps true."""

_COUNT = re.compile(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?|deselected)\b")
_SUMMARY = re.compile(r"^=* ?(\d+ (?:passed|failed|errors?)\b[^=]*?) ?=*$")
"""pytest's final line: ``=== 115 passed, 10 skipped in 9.6s ===`` (``-q``: without ``=``)."""
_WIDTH = 80  # pytest's line width in a non-terminal run


def run_figure(output: str) -> str:
    """Return the counts of pytest's final summary line: ``"115 passed, 10 skipped"``.

    Args:
        output: pytest's output (``-q`` or not); its last ``=== ... ===`` summary line counts.

    Raises:
        ValueError: If the output holds no summary line (pytest did not finish).
    """
    for line in reversed(output.splitlines()):
        found = _SUMMARY.match(line.strip())
        if found:
            return ", ".join(f"{n} {what}" for n, what in _COUNT.findall(found.group(1)))
    raise ValueError("no pytest summary line (=== N passed ... ===) in the output")


def doc_figure(text: str) -> str:
    """Return the counts the guide's example run shows.

    Raises:
        ValueError: If the guide has no summary line, or more than one.
    """
    lines = [line for line in text.splitlines() if _SUMMARY.match(line.strip())]
    if len(lines) != 1:
        raise ValueError(f"expected one pytest summary line in {DOC.name}, found {len(lines)}")
    return run_figure(lines[0])


def summary_line(figure: str) -> str:
    """Return ``figure`` as pytest prints it: centred in ``=`` to 80 columns."""
    return f" {figure} ".center(_WIDTH, "=")


def write_figure(text: str, figure: str) -> str:
    """Return the guide's text with its summary line showing ``figure``."""
    return "\n".join(
        summary_line(figure) if _SUMMARY.match(line.strip()) else line for line in text.split("\n")
    )


def main(argv: list[str]) -> int:
    """Run the command line; return the exit status (0 same or written, 1 mismatch, 2 usage)."""
    if len(argv) not in (1, 2) or (len(argv) == 2 and argv[1] != "--write"):
        print(__doc__.split("Usage::")[1].split("Standard")[0], file=sys.stderr)
        return 2
    text = DOC.read_text(encoding="utf-8")
    try:
        figure = run_figure(Path(argv[0]).read_text(encoding="utf-8", errors="replace"))
        quoted = doc_figure(text)
    except (OSError, ValueError) as exc:
        print(f"driver_doc_figure: {exc}", file=sys.stderr)
        return 2
    if len(argv) == 2:
        DOC.write_text(write_figure(text, figure), encoding="utf-8")
        print(f"{DOC.name}: example run figure {quoted!r} -> {figure!r}")
        return 0
    if quoted == figure:
        print(f"{DOC.name}: the example run's figure {figure!r} is current")
        return 0
    print(
        f"{DOC.name} says the example driver's run gives {quoted!r}; this run gave {figure!r}. "
        f"Write the run's figure: python3 .ci/driver_doc_figure.py {argv[0]} --write",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
