"""What a newcomer's default run says about skipped tests: one line per reason, and each
reason says how to get the missing piece (a test server, the recorded real data)."""

from __future__ import annotations

from pathlib import Path

import pytest

from threadkeep_contract_tests import require_realdata

pytest_plugins = ["pytester"]

SKIPS = """
import pytest
from threadkeep_contract_tests import require_service

@pytest.mark.parametrize("n", range(5))
def test_needs_postgres(n):
    require_service("THREADKEEP_TEST_POSTGRES_URL", "PostgreSQL")

@pytest.mark.parametrize("n", range(3))
def test_needs_s3(n):
    require_service("THREADKEEP_TEST_S3_URL", "S3")

def test_other():
    pytest.skip("something else")

def test_runs():
    pass
"""


@pytest.fixture(autouse=True)
def _no_services(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    for name in ("THREADKEEP_TEST_POSTGRES_URL", "THREADKEEP_TEST_S3_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("THREADKEEP_REQUIRE_SERVICES", raising=False)


def test_skips_are_one_line_per_reason_with_how_to_start_the_server(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_skips=SKIPS)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=9)
    lines = [line for line in result.outlines if line.startswith("SKIPPED")]
    assert lines == [
        "SKIPPED    5: PostgreSQL is not configured: set THREADKEEP_TEST_POSTGRES_URL to run "
        "these tests; from a threadkeep clone: `bash .ci/services/postgres.sh start` then "
        '`eval "$(bash .ci/services/postgres.sh env)"`',
        "SKIPPED    3: S3 is not configured: set THREADKEEP_TEST_S3_URL to run these tests; "
        "from a threadkeep clone: `bash .ci/services/s3.sh start` then "
        '`eval "$(bash .ci/services/s3.sh env)"`',
        "SKIPPED    1: something else",
    ]


def test_rs_still_lists_each_skip(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_skips=SKIPS)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs")
    assert not [line for line in result.outlines if "by reason" in line]
    assert len([line for line in result.outlines if line.startswith("SKIPPED [")]) >= 3


def test_a_missing_realdata_file_says_what_it_is(tmp_path: Path) -> None:
    with pytest.raises(pytest.skip.Exception) as caught:
        require_realdata(tmp_path / "nowhere.json", "tau-bench trajectories")
    reason = str(caught.value)
    assert "tau-bench trajectories not present" in reason
    assert "recorded real conversations are kept beside the repository" in reason
    assert "not shipped" in reason
    assert require_realdata(tmp_path) == tmp_path
