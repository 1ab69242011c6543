"""``--format openai`` reads legacy function calling and Responses API item lists too."""

from __future__ import annotations

import json

import pytest

from threadkeep import InvalidArgument
from threadkeep._importers.openai import import_openai

USER = "u"
LEGACY = [
    ("system", "openai:0", "You can call functions.", None, (), ()),
    ("user", "openai:1", "Weather in Oslo and Rome?", None, (), ()),
    (
        "assistant",
        "openai:2",
        "",
        None,
        (("openai:2:function_call", "get_weather", '{"city": "Oslo"}', "complete"),),
        (),
    ),
    (
        "assistant",
        "openai:3",
        "",
        None,
        (("openai:3:function_call", "get_time", '{"city":"Rome"}', "complete"),),
        (),
    ),
    # Answered out of order: each answer links to the newest open call of its name.
    ("tool", "openai:4", "14:05", "openai:3:function_call", (), ()),
    ("tool", "openai:5", '{"temp": -3}', "openai:2:function_call", (), ()),
    ("assistant", "openai:6", "Oslo is -3 C; it is 14:05 in Rome.", None, (), ()),
]
CALC = ("call_calc", "calc", '{"expr":"2+2"}', "complete")
RESPONSE_1 = [
    ("user", "openai:0", "What is 2+2? Use the calculator.", None, (), ()),
    ("assistant", "openai:1", "", None, (CALC,), (("Call the calculator.", "gAAAA-secret"),)),
]
RESPONSE_2 = [
    ("user", "openai:0", "What is 2+2? Use the calculator.", None, (), ()),
    ("assistant", "openai:1", "", None, (CALC,), (("", "gAAAA-secret"),)),
    ("tool", "openai:3", "4", "call_calc", (), ()),
    ("assistant", "openai:4", "2+2 is 4.", None, (), ()),
]


async def _check(store, reader, fixture_copy) -> None:
    legacy = await import_openai(store, fixture_copy("openai/legacy.json"), user_id=USER)
    assert (legacy.chats, legacy.messages, legacy.tool_calls) == (1, 7, 2)
    assert await reader.records(store, USER, "openai:legacy.json:id=legacy-1") == LEGACY
    responses = await import_openai(store, fixture_copy("openai/responses.jsonl"), user_id=USER)
    assert (responses.chats, responses.messages, responses.tool_calls) == (2, 6, 2)
    assert await reader.records(store, USER, "openai:responses.jsonl:id=resp-1") == RESPONSE_1
    assert await reader.records(store, USER, "openai:responses.jsonl:id=resp-2") == RESPONSE_2
    again = await import_openai(store, fixture_copy("openai/responses.jsonl"), user_id=USER)
    assert (again.messages_created, again.messages_present) == (0, 6)


async def test_legacy_and_responses_round_trip(store, reader, fixture_copy):
    await _check(store, reader, fixture_copy)


async def test_legacy_and_responses_round_trip_on_servers(server_store, reader, fixture_copy):
    await _check(server_store, reader, fixture_copy)


async def test_kept_fields(store, reader, fixture_copy):
    await import_openai(store, fixture_copy("openai/legacy.json"), user_id=USER)
    await import_openai(store, fixture_copy("openai/responses.jsonl"), user_id=USER)
    legacy = await reader.history(store, USER, "openai:legacy.json:id=legacy-1")
    assert legacy[4].metadata == {"openai": {"name": "get_time", "role": "function"}}
    second = await reader.history(store, USER, "openai:responses.jsonl:id=resp-2")
    assert second[0].metadata == {"text_part_lengths": [13, 19]}
    assert second[1].reasonings[0].agui_id == "rs_1"
    assert second[1].tool_calls[0].model_extra == {"openai": {"id": "fc_1"}}
    assert second[3].metadata == {"openai": {"id": "msg_9", "status": "completed"}}
    first = await reader.history(store, USER, "openai:responses.jsonl:id=resp-1")
    summary = [{"type": "summary_text", "text": "Call the calculator."}]
    assert first[1].reasonings[0].model_extra == {"summary": summary}


async def test_other_items_are_kept(store, reader, tmp_path):
    items = [
        {"role": "user", "content": "search"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"query": "q"}},
        {"type": "custom_tool_call", "call_id": "ct_1", "name": "grep", "input": "x.*"},
        {"type": "custom_tool_call_output", "call_id": "ct_1", "output": "found"},
        {"type": "reasoning", "id": "rs_9", "summary": [], "encrypted_content": "zz"},
    ]
    path = tmp_path / "items.json"
    path.write_text(json.dumps([items]), encoding="utf-8")
    await import_openai(store, path, user_id=USER)
    assert await reader.records(store, USER, "openai:items.json:0") == [
        ("user", "openai:0", "search", None, (), ()),
        (
            "assistant",
            "openai:1",
            "",
            None,
            (
                ("ws_1", "web_search_call", '{"action":{"query":"q"}}', "complete"),
                ("ct_1", "grep", "x.*", "complete"),
            ),
            (),
        ),
        ("tool", "openai:3", "found", "ct_1", (), ()),
        ("assistant", "openai:4", "", None, (), (("", "zz"),)),
    ]


async def test_a_text_input_is_the_user_message(store, reader, tmp_path):
    output = [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Hi!"}],
        }
    ]
    path = tmp_path / "text.json"
    path.write_text(json.dumps({"input": "Hello", "output": output}), encoding="utf-8")
    await import_openai(store, path, user_id=USER)
    assert await reader.records(store, USER, "openai:text.json:0") == [
        ("user", "openai:0", "Hello", None, (), ()),
        ("assistant", "openai:1", "Hi!", None, (), ()),
    ]


@pytest.mark.parametrize(
    ("items", "needles"),
    [
        ([{"type": "function_call", "name": "f", "arguments": "{}"}], ("item 0", "call_id")),
        ([{"type": "function_call_output", "output": "x"}], ("item 0", "call_id")),
        ([{"type": "message", "role": "robot", "content": "x"}], ("item 0", "'robot'")),
        ([{"type": "message", "role": "user", "content": [{"text": "x"}]}], ("part 0", "type")),
    ],
)
async def test_malformed_items_are_named(store, tmp_path, items, needles):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"input": items}), encoding="utf-8")
    with pytest.raises(InvalidArgument) as caught:
        await import_openai(store, path, user_id=USER)
    assert "bad.json: record 0" in str(caught.value)
    for needle in needles:
        assert needle in str(caught.value)
    assert (await store.list_chats({"user_id": USER})).items == []
