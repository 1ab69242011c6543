"""Any call may fail or lose its answer: the store raises only threadkeep errors, and retried
appends (with agui_ids) end with every message stored exactly once, in order."""

from __future__ import annotations

import pytest

from threadkeep import Message, ThreadkeepError, ToolCall
from threadkeep_memservice import MemServiceStore
from threadkeep_memservice.emulator import FaultAction, FaultRule, MemoryService, MemServiceError


async def _retry(call: object, *args: object, attempts: int = 50) -> object:
    for _ in range(attempts):
        try:
            return await call(*args)  # type: ignore[operator]
        except MemServiceError as exc:  # pragma: no cover - the failure this test exists for
            pytest.fail(f"an emulator error escaped the driver: {exc!r}")
        except ThreadkeepError:
            continue
    pytest.fail("50 retries did not get through 15 % faults")


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_retried_appends_under_random_faults_store_each_message_once(seed: int) -> None:
    service = MemoryService(seed=seed)
    faults = [
        FaultRule("*", FaultAction.FAIL, probability=0.1, name="10 % of calls fail"),
        FaultRule(
            "*", FaultAction.TIMEOUT, applied=True, probability=0.05, name="5 % lose their answer"
        ),
    ]
    store = MemServiceStore("memservice://", service=service, faults=faults)
    await _retry(store.open)
    try:
        chat = await _retry(store.create_chat, "u", "t")
        chat_id = chat.chat_id  # type: ignore[attr-defined]
        for i in range(0, 40, 4):
            batch = [
                Message(
                    role="assistant",
                    agui_id=f"m{j}",
                    content=f"{j}",
                    tool_calls=[ToolCall(agui_id=f"c{j}", arguments="")],
                )
                for j in range(i, i + 4)
            ]
            await _retry(store.append_messages, chat_id, batch)
    finally:
        await store.close()
    assert sum(rule.fired for rule in faults) > 10
    async with MemServiceStore("memservice://", service=service) as clean:
        page = await clean.list_messages(chat_id, limit=200)
        assert [m.content for m in page.items] == [str(j) for j in range(40)]
        seqs = [m.seq or 0 for m in page.items]
        assert seqs == sorted(set(seqs))
        assert len((await clean.list_chats()).items) == 1
