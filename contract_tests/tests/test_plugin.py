"""The pytest plugin, public names, back-door rows, services, results and the matrix."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import uuid4

import pytest
from hypothesis import Phase, settings

import threadkeep_contract_tests
from threadkeep_contract_tests import RawChat, RawMessage, require_service
from threadkeep_contract_tests.matrix import main as matrix_main

pytest_plugins = ["pytester"]

MEMORY_SUITE = """
from uuid import uuid4

import pytest
from threadkeep._memory import MemoryStore
from threadkeep_contract_tests import RawChat, RawMessage, StoreContract


class TestMemory(StoreContract):
    @pytest.fixture
    def store_factory(self):
        url = f"memory://plugin-{uuid4().hex}"
        return lambda **options: MemoryStore(url, **options)

    async def raw_chats(self, store):
        rows = store.driver._state.chats.values()
        return [RawChat.from_body(r.body, deleted=r.deleted) for r in rows]

    async def raw_messages(self, store, chat_id):
        row = store.driver._state.chats.get(chat_id)
        return [
            RawMessage.from_body(
                m.body, chat_id=chat_id, seq=m.seq, hidden=m.deleted_at is not None
            )
            for m in ([] if row is None else row.messages.values())
        ]
"""

SERVICE_TEST = """
from threadkeep_contract_tests import require_service

def test_needs_service():
    assert require_service("THREADKEEP_TEST_NOWHERE_URL", "Nowhere DB")
"""


@pytest.fixture(autouse=True)
def _inner_ini(pytester: pytest.Pytester) -> None:
    """Inner runs configure pytest-asyncio like a driver package would."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def test_public_names_are_sorted_and_exported() -> None:
    """``__all__`` is sorted and every name in it exists (httpx's exported-members check)."""
    names = threadkeep_contract_tests.__all__
    assert names == sorted(names)
    for name in names:
        assert hasattr(threadkeep_contract_tests, name), name


def test_profiles_are_registered() -> None:
    """``ci`` is derandomized, deadline-free and bounded; ``nightly`` runs 10x its examples."""
    ci, nightly = settings.get_profile("ci"), settings.get_profile("nightly")
    assert ci.derandomize
    assert ci.deadline is None
    assert ci.database is None
    assert nightly.max_examples == 10 * ci.max_examples
    for name in ("dev", "ci", "nightly"):
        assert Phase.explain not in settings.get_profile(name).phases


def test_raw_rows_decode_stored_bodies() -> None:
    """``RawChat``/``RawMessage.from_body`` read ids, role and content from a JSON body."""
    chat_id, message_id = uuid4(), uuid4()
    chat = RawChat.from_body(
        json.dumps({"chat_id": str(chat_id), "user_id": "u", "thread_id": "t"}), deleted=True
    )
    assert (chat.chat_id, chat.user_id, chat.thread_id, chat.deleted) == (chat_id, "u", "t", True)
    body = {"message_id": str(message_id), "role": "user", "content": "a\x00b", "agui_id": "x"}
    message = RawMessage.from_body(json.dumps(body), chat_id=chat_id, seq=3, hidden=False)
    assert (message.message_id, message.content, message.agui_id, message.seq) == (
        message_id,
        "a\x00b",
        "x",
        3,
    )
    assert message.body == body
    with pytest.raises(TypeError):
        RawMessage.from_body("[1]", chat_id=chat_id, seq=1, hidden=False)


def test_require_service_returns_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """A configured service's value is returned."""
    monkeypatch.setenv("THREADKEEP_TEST_SOMEWHERE_URL", " db://x ")
    assert require_service("THREADKEEP_TEST_SOMEWHERE_URL", "Somewhere") == "db://x"


@pytest.mark.parametrize(
    ("args", "env", "outcome"),
    [
        ((), "", {"skipped": 1}),
        (("--threadkeep-require-services",), "", {"failed": 1}),
        ((), "1", {"failed": 1}),
    ],
    ids=["skip", "option-fails", "env-fails"],
)
def test_missing_service_skips_or_fails(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
    env: str,
    outcome: dict[str, int],
) -> None:
    """A missing service skips naming its variable, and fails when services are required."""
    monkeypatch.setenv("THREADKEEP_REQUIRE_SERVICES", env)
    monkeypatch.delenv("THREADKEEP_TEST_NOWHERE_URL", raising=False)
    pytester.makepyfile(test_service=SERVICE_TEST)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rsf", *args)
    result.assert_outcomes(**outcome)
    result.stdout.fnmatch_lines(["*Nowhere DB is not configured: set THREADKEEP_TEST_NOWHERE_URL*"])


def test_markers_are_registered(pytester: pytest.Pytester) -> None:
    """The plugin registers its markers (``--strict-markers`` accepts them)."""
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["*threadkeep_capability(name)*", "*threadkeep_service(name)*"])


def test_results_feed_the_matrix(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """``--threadkeep-results`` records outcomes per area; the matrix renders them."""
    pytester.makepyfile(test_memory=MEMORY_SUITE)
    results = tmp_path / "results.json"
    selection = "retry_returns_stored or concurrent_processes or steps_capability"
    pytester.runpytest(
        "-p", "no:cacheprovider", "-k", selection, f"--threadkeep-results={results}"
    ).assert_outcomes(passed=2, skipped=1)
    tests = {t["test"]: t for t in json.loads(results.read_text(encoding="utf-8"))["tests"]}
    assert tests["test_retry_returns_stored_message"]["area"] == "Idempotency"
    assert tests["test_retry_returns_stored_message"]["outcome"] == "passed"
    skipped = tests["test_concurrent_processes_capability_holds"]
    assert skipped["outcome"] == "skipped"
    assert "concurrent_processes" in skipped["reason"]
    assert tests["test_steps_capability_matches"]["driver"] == "MemoryDriver (memory)"
    output = tmp_path / "capabilities.md"
    assert matrix_main(["--output", str(output), "--results", str(results)]) == 0
    text = output.read_text(encoding="utf-8")
    assert "| `steps` | yes ✅ |" in text
    assert "| `concurrent_processes` | no |" in text
    assert "| Idempotency | ✅ 1 pass |" in text
