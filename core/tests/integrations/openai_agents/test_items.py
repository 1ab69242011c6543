"""Every input item kind the Agents SDK produces round-trips exactly, stored typed where it maps."""

from __future__ import annotations

import copy

import pytest

from threadkeep import FilePart, ImagePart, Role
from threadkeep.integrations.openai_agents import (
    METADATA_KEY,
    ThreadkeepSession,
    item_to_message,
    message_to_items,
)

PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/"
    "PchI7wAAAABJRU5ErkJggg=="
)

ITEMS: list[dict] = [
    {"role": "system", "content": "Be brief."},
    {"role": "developer", "content": "Use tools."},
    {"role": "user", "content": "plain text"},
    {"role": "user", "content": "", "type": "message"},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is in "},
            {"type": "input_image", "image_url": PNG, "detail": "auto"},
            {"type": "input_text", "text": "this picture? ünïcödé 😊"},
            {"type": "input_image", "file_id": "file-123", "detail": "high", "image_url": None},
            {"type": "input_file", "file_id": "file-9", "filename": "a.pdf"},
            {"type": "input_file", "file_data": "JVBERi0=", "filename": "b.pdf"},
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
        ],
    },
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [
            {
                "type": "output_text",
                "text": "It is a pixel.",
                "annotations": [{"type": "url_citation", "url": "https://x", "title": "t"}],
                "logprobs": [],
            },
            {"type": "refusal", "refusal": "I won't say more."},
        ],
    },
    {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [
            {"type": "summary_text", "text": "Thinking about the tool."},
            {"type": "summary_text", "text": "Then answering."},
        ],
        "encrypted_content": "gAAAAABencrypted==",
    },
    {
        "id": "rs_2",
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": "raw"}],
    },
    {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Paris",  "unit":"C"}',
        "status": "completed",
    },
    {
        "type": "function_call",
        "call_id": "call_ns",
        "name": "lookup",
        "arguments": "",
        "namespace": "crm",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21 C"},
    {
        "type": "function_call_output",
        "call_id": "call_ns",
        "output": [{"type": "input_text", "text": "a"}, {"type": "input_image", "image_url": PNG}],
    },
    {
        "id": "cu_1",
        "type": "computer_call",
        "call_id": "call_c",
        "action": {"type": "click", "x": 10, "y": 20.5, "button": "left"},
        "pending_safety_checks": [],
        "status": "completed",
    },
    {
        "type": "computer_call_output",
        "call_id": "call_c",
        "output": {"type": "computer_screenshot", "image_url": PNG},
        "acknowledged_safety_checks": [{"id": "sc", "code": "c", "message": "m"}],
    },
    {
        "id": "ct_1",
        "type": "custom_tool_call",
        "call_id": "call_x",
        "name": "sql",
        "input": "SELECT 1",
    },
    {"type": "custom_tool_call_output", "call_id": "call_x", "output": "1"},
    {
        "id": "ls_1",
        "type": "local_shell_call",
        "call_id": "call_ls",
        "action": {"type": "exec", "command": ["ls", "-l"], "env": {}},
        "status": "completed",
    },
    {"id": "ls_1", "type": "local_shell_call_output", "output": "total 0"},
    {
        "type": "shell_call",
        "call_id": "call_sh",
        "action": {"commands": ["echo hi"], "timeout_ms": 1000},
        "status": "completed",
    },
    {
        "type": "shell_call_output",
        "call_id": "call_sh",
        "output": [{"stdout": "hi\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}],
    },
    {
        "type": "apply_patch_call",
        "call_id": "call_ap",
        "operation": {"type": "create_file", "path": "a.txt", "diff": "+a"},
        "status": "completed",
    },
    {
        "type": "apply_patch_call_output",
        "call_id": "call_ap",
        "status": "completed",
        "output": "ok",
    },
    {
        "id": "mcp_1",
        "type": "mcp_call",
        "server_label": "docs",
        "name": "search",
        "arguments": '{"q":"x"}',
        "output": "found",
        "error": None,
    },
    {"id": "mcpl", "type": "mcp_list_tools", "server_label": "docs", "tools": []},
    {
        "id": "mcpr",
        "type": "mcp_approval_request",
        "server_label": "docs",
        "name": "rm",
        "arguments": "{}",
    },
    {"type": "mcp_approval_response", "approval_request_id": "mcpr", "approve": True},
    {
        "id": "ws_1",
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": "q"},
    },
    {
        "id": "fs_1",
        "type": "file_search_call",
        "queries": ["q"],
        "status": "completed",
        "results": None,
    },
    {"id": "ig_1", "type": "image_generation_call", "status": "completed", "result": "AAAA"},
    {
        "id": "ci_1",
        "type": "code_interpreter_call",
        "code": "1+1",
        "container_id": "c",
        "outputs": None,
        "status": "completed",
    },
    {"type": "item_reference", "id": "msg_0"},
    {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque"},
    {"type": "some_future_kind", "payload": {"nested": [1, 2.5, None, True]}},
]


@pytest.mark.parametrize("item", ITEMS, ids=lambda item: str(item.get("type", item.get("role"))))
def test_each_item_kind_round_trips_exactly(item) -> None:
    original = copy.deepcopy(item)
    message = item_to_message(item)
    assert item == original  # the caller's item is not changed
    assert message_to_items(message) == [original]
    # and it survives JSON (what every driver stores)
    reread = type(message).model_validate_json(message.model_dump_json())
    assert message_to_items(reread) == [original]


def test_what_maps_is_stored_typed() -> None:
    call = item_to_message(ITEMS[8])
    assert call.role is Role.ASSISTANT
    assert call.tool_calls[0].agui_id == "call_1"
    assert call.tool_calls[0].name == "get_weather"
    assert call.tool_calls[0].arguments == '{"city": "Paris",  "unit":"C"}'  # exact text
    output = item_to_message(ITEMS[10])
    assert (output.role, output.tool_call_ref, output.content) == (
        Role.TOOL,
        "call_1",
        "sunny, 21 C",
    )
    reasoning = item_to_message(ITEMS[6])
    assert reasoning.reasonings[0].encrypted_value == "gAAAAABencrypted=="
    assert reasoning.reasonings[0].content == "Thinking about the tool.Then answering."
    picture = item_to_message(ITEMS[4])
    assert picture.content == "What is in this picture? ünïcödé 😊"
    assert [type(p) for p in picture.parts] == [ImagePart, ImagePart, FilePart, FilePart]
    assert picture.parts[0].url == PNG
    assert picture.parts[3].filename == "b.pdf"
    assert PNG not in str(picture.metadata)  # the image is stored once, in its part
    computer = item_to_message(ITEMS[12])
    assert computer.tool_calls[0].agui_id == "call_c"
    assert item_to_message(ITEMS[13]).tool_call_ref == "call_c"
    unknown = item_to_message(ITEMS[-1])
    assert unknown.metadata[METADATA_KEY] == {"item": ITEMS[-1]}


async def test_every_kind_round_trips_through_each_backend(backend) -> None:
    with backend.sync_store() as store:
        session = ThreadkeepSession("all-kinds", store=store)
        await session.add_items(copy.deepcopy(ITEMS))
        assert await session.get_items() == ITEMS
        assert await session.get_items(limit=3) == ITEMS[-3:]
        assert await session.pop_item() == ITEMS[-1]
        assert await session.get_items() == ITEMS[:-1]
        chat = store.find_chat("openai-agents", "all-kinds")
        assert chat is not None
        stored = store.list_messages(chat.chat_id, limit=200).items
        assert len(stored) == len(ITEMS) - 1


_SCREENSHOT = "data:image/png;base64," + "iVBORw0KGgo" * 200_000  # 2.2 MB, as computer use sends
LARGE_ITEMS = [
    {"role": "user", "content": [{"type": "input_image", "image_url": _SCREENSHOT}]},
    {"type": "computer_call", "call_id": "cu_1", "action": {"type": "screenshot"}},
    {
        "type": "computer_call_output",
        "call_id": "cu_1",
        "output": {"type": "computer_screenshot", "image_url": _SCREENSHOT},
    },
    {"type": "function_call", "call_id": "f_1", "name": "snap", "arguments": "{}"},
    {
        "type": "function_call_output",
        "call_id": "f_1",
        "output": [{"type": "input_image", "image_url": _SCREENSHOT}],
    },
]


async def test_items_with_megabytes_of_untyped_data_round_trip(backend) -> None:
    # A screenshot's data URL has no typed place a store bounds by its payload limit: the
    # SDK's own sessions store it, so this one must too (not PayloadTooLarge).
    with backend.sync_store() as store:
        session = ThreadkeepSession("large", store=store)
        await session.add_items(copy.deepcopy(LARGE_ITEMS))
        assert await session.get_items() == LARGE_ITEMS
        assert await session.pop_item() == LARGE_ITEMS[-1]
        chat = store.find_chat("openai-agents", "large")
        assert chat is not None
        stored = store.list_messages(chat.chat_id, limit=10).items
        output = stored[-2]  # the computer_call_output: still linked to its call
        assert output.role is Role.TOOL
        assert output.tool_call_ref == "cu_1"
        assert [c.agui_id for c in stored[-3].tool_calls] == ["cu_1"]


async def test_clear_session_starts_over_and_keeps_history(backend) -> None:
    with backend.sync_store() as store:
        session = ThreadkeepSession("clear", store=store)
        await session.add_items([{"role": "user", "content": "before"}])
        await session.clear_session()
        assert await session.get_items() == []
        assert await session.pop_item() is None  # the boundary is never popped
        await session.add_items([{"role": "user", "content": "after"}])
        assert await session.get_items() == [{"role": "user", "content": "after"}]
        chat = store.find_chat("openai-agents", "clear")
        assert chat is not None
        history = store.list_messages(chat.chat_id).items
        assert [m.content for m in history if m.kind == "message"] == ["before", "after"]

        deleting = ThreadkeepSession("gone", store=store, clear="delete")
        await deleting.add_items([{"role": "user", "content": "x"}])
        await deleting.clear_session()
        assert store.find_chat("openai-agents", "gone") is None
        await deleting.add_items([{"role": "user", "content": "new"}])
        assert await deleting.get_items() == [{"role": "user", "content": "new"}]


async def test_built_from_a_url_and_usable_from_any_loop(tmp_path) -> None:
    import asyncio

    from threadkeep.integrations import _backend

    url = f"sqlite+aiosqlite:///{tmp_path / 'url.db'}"
    try:
        session = ThreadkeepSession.from_url("u1", url)
        await session.add_items([{"role": "user", "content": "one"}])
        other_loop = await asyncio.to_thread(asyncio.run, session.get_items())
        assert other_loop == [{"role": "user", "content": "one"}]
        again = ThreadkeepSession("u1", store=url)  # the same shared store
        assert await again.get_items() == other_loop
    finally:
        _backend._close_shared()


async def test_an_async_store_is_used_on_the_callers_loop(tmp_path) -> None:
    import threadkeep

    async with threadkeep.open_store(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}") as store:
        session = ThreadkeepSession("s", store=store, user_id="person-1")
        await session.add_items([{"role": "user", "content": "hi"}])
        assert await session.get_items() == [{"role": "user", "content": "hi"}]
        chat = await store.find_chat("person-1", "s")
        assert chat is not None


async def test_messages_of_other_clients_read_as_items(backend) -> None:
    with backend.sync_store() as store:
        chat = store.create_chat("openai-agents", "mixed")
        store.append_messages(
            chat.chat_id,
            [
                {"role": "user", "content": "from the api"},
                {
                    "role": "assistant",
                    "content": "calling",
                    "tool_calls": [{"agui_id": "c1", "name": "f", "arguments": "{}"}],
                },
                {"role": "tool", "tool_call_ref": "c1", "content": "done"},
            ],
        )
        session = ThreadkeepSession("mixed", store=store)
        assert await session.get_items() == [
            {"role": "user", "content": "from the api"},
            {"role": "assistant", "content": "calling"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "done"},
        ]
        assert await session.pop_item() == {
            "type": "function_call_output",
            "call_id": "c1",
            "output": "done",
        }
        assert (await session.pop_item())["type"] == "function_call"
        assert await session.get_items() == [
            {"role": "user", "content": "from the api"},
            {"role": "assistant", "content": "calling"},
        ]


def test_a_missing_sdk_names_the_extra(monkeypatch) -> None:
    import sys

    from threadkeep.integrations._requires import require_framework

    monkeypatch.setitem(sys.modules, "agents", None)
    with pytest.raises(ModuleNotFoundError) as caught:
        require_framework("agents", "the OpenAI Agents SDK", "openai-agents")
    assert str(caught.value) == (
        "threadkeep.integrations.openai_agents needs the OpenAI Agents SDK: "
        "pip install 'threadkeep[openai-agents]'"
    )
