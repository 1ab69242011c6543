"""docs/writing-a-driver.md quotes the example driver's test run; CI checks it against a real
run with ``.ci/driver_doc_figure.py`` (see ``run_extra_checks`` in ``.ci/run``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "driver_doc_figure", ROOT / ".ci/driver_doc_figure.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("output", "figure"),
    [
        (
            "....\n=========== 115 passed, 10 skipped in 83.96s (0:01:23) ===========\n",
            "115 passed, 10 skipped",
        ),
        ("..s\n115 passed, 10 skipped in 89.63s (0:01:29)\n", "115 passed, 10 skipped"),
        (
            "== 3 failed, 112 passed, 10 skipped, 1 xfailed in 9.1s ==",
            "3 failed, 112 passed, 10 skipped, 1 xfailed",
        ),
    ],
    ids=["plain", "quiet", "failures"],
)
def test_the_run_figure_is_read_from_pytest_output(
    script: ModuleType, output: str, figure: str
) -> None:
    assert script.run_figure(output) == figure


def test_an_unfinished_run_has_no_figure(script: ModuleType) -> None:
    with pytest.raises(ValueError, match="no pytest summary line"):
        script.run_figure("collected 12 items\n....")


def test_the_guide_quotes_one_run_in_pytest_form(script: ModuleType) -> None:
    text = script.DOC.read_text(encoding="utf-8")
    figure = script.doc_figure(text)
    assert figure.split(", ")[0].endswith(" passed")
    assert script.summary_line(figure) in text.splitlines()
    assert ".ci/driver_doc_figure.py" in text  # the guide says where the figure comes from


def test_a_stale_figure_fails_and_write_fixes_it(
    script: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = tmp_path / "writing-a-driver.md"
    doc.write_text(
        "```console\n$ pytest\n" + script.summary_line("88 passed, 9 skipped") + "\n```\n"
    )
    monkeypatch.setattr(script, "DOC", doc)
    log = tmp_path / "run.log"
    log.write_text("=== 115 passed, 10 skipped in 9.66s ===\n")
    assert script.main([str(log)]) == 1
    assert "says the example driver's run gives '88 passed, 9 skipped'" in capsys.readouterr().err
    assert script.main([str(log), "--write"]) == 0
    assert script.doc_figure(doc.read_text()) == "115 passed, 10 skipped"
    assert script.main([str(log)]) == 0
