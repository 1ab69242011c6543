"""The OpenAI importer through its Python API: mapping, keys, progress, reports."""

from __future__ import annotations

import pytest

from threadkeep import FilePart, ImagePart, InvalidArgument, Role, open_store
from threadkeep._importers import ImportReport, resolve_importer
from threadkeep._importers.openai import convert_message, import_openai, thread_id_for


def test_convert_assistant_tool_call_message():
    message = convert_message(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"x":1}'},
                }
            ],
        },
        4,
    )
    assert (message.role, message.content, message.agui_id) == (Role.ASSISTANT, "", "openai:4")
    (call,) = message.tool_calls
    assert (call.agui_id, call.name, call.arguments) == ("call_1", "f", '{"x":1}')
    assert message.metadata == {"openai": {"content": None}}


def test_convert_tool_message_links_its_call():
    message = convert_message(
        {"role": "tool", "tool_call_id": "call_1", "name": "f", "content": "ok"}, 0
    )
    assert message.tool_call_ref == "call_1"
    assert message.metadata == {"openai": {"name": "f"}}


def test_non_string_arguments_become_json_text():
    message = convert_message(
        {
            "role": "assistant",
            "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"a": [1, "é"]}}}],
        },
        0,
    )
    assert message.tool_calls[0].arguments == '{"a": [1, "é"]}'


def test_file_and_unknown_parts_are_typed():
    message = convert_message(
        {
            "role": "user",
            "content": [
                {"type": "file", "file": {"filename": "a.pdf", "file_id": "f-1"}},
                {"type": "image_url", "image_url": "data:image/png;base64,AAAA"},
                {"type": "refusal", "refusal": "no"},
            ],
        },
        0,
    )
    file_part, image_part, custom = message.parts
    assert isinstance(file_part, FilePart)
    assert file_part.filename == "a.pdf"
    assert file_part.model_dump()["file_id"] == "f-1"
    assert isinstance(image_part, ImagePart)
    assert image_part.url == "data:image/png;base64,AAAA"
    assert custom.model_dump() == {"type": "custom", "name": "refusal", "value": "no"}
    assert message.content == ""


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ({"messages": []}, "openai:f.json:3"),
        ({"id": "abc", "messages": []}, "openai:f.json:id=abc"),
        ({"id": 0, "messages": []}, "openai:f.json:id=0"),
        ({"id": "", "messages": []}, "openai:f.json:3"),
        ({"id": True, "messages": []}, "openai:f.json:3"),
        ([], "openai:f.json:3"),
    ],
)
def test_thread_ids_are_deterministic(record, expected):
    assert thread_id_for("f.json", 3, record) == expected


def test_bad_entries_raise_invalid_argument():
    with pytest.raises(InvalidArgument, match="not a JSON object"):
        convert_message("hi", 0)
    with pytest.raises(InvalidArgument, match="tool_call_id is a int"):
        convert_message({"role": "tool", "tool_call_id": 5}, 0)


async def test_import_through_the_api_reports_progress(transcripts, memory_url):
    path = transcripts.write(
        "api.json", [transcripts.record(1), transcripts.record(2), transcripts.record(0)]
    )
    seen: list[tuple[int, int]] = []
    async with open_store(memory_url) as store:
        report = await import_openai(
            store, path, user_id="u", progress=lambda d, t: seen.append((d, t))
        )
        again = await import_openai(store, str(path), user_id="u")
        chat = await store.find_chat("u", "openai:api.json:1")
        assert chat is not None
        assert chat.name == "api.json #1"
        page = await store.list_messages(chat.chat_id)
    assert seen == [(0, 3), (1, 3), (2, 3), (3, 3)]  # (0, N): checked, writing starts
    assert (report.chats_created, report.messages_created, report.tool_calls_created) == (3, 15, 3)
    assert (again.chats_present, again.messages_present, again.tool_calls_present) == (3, 15, 3)
    assert again.messages_created == again.chats_created == 0
    assert len(page.items) == 9


def test_report_merge_and_summary():
    report = ImportReport(chats_created=1, messages_created=1000, tool_calls_present=2)
    report.merge(ImportReport(chats_present=1, messages_present=5))
    assert (report.chats, report.messages, report.tool_calls) == (2, 1005, 2)
    assert report.summary() == (
        "2 chats (1 new, 1 already present), 1,005 messages (1,000 new, 5 already present), "
        "2 tool calls (0 new, 2 already present)"
    )


def test_resolve_importer_returns_the_function():
    assert resolve_importer("openai") is import_openai
