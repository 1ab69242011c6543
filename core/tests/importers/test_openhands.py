"""The OpenHands importer: actions and observations linked by ``cause``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from threadkeep import InvalidArgument
from threadkeep._importers.openhands import import_openhands

FIXTURES = Path(__file__).parent / "fixtures"

USER = "u"
EVENTS = [
    ("system", "openhands:0", "You are OpenHands agent.", None, (), ()),
    ("user", "openhands:1", "List files and read a.txt", None, (), ()),
    (
        "assistant",
        "openhands:3",
        "I will look around.",
        None,
        (
            ("toolu_1", "execute_bash", '{"command": "ls"}', "complete"),
            ("toolu_2", "str_replace_editor", '{"command": "view", "path": "/w/a.txt"}', "errored"),
        ),
        (),
    ),
    ("tool", "openhands:5", "a.txt", "toolu_1", (), ()),
    ("tool", "openhands:6", "ERROR: /w/a.txt does not exist", "toolu_2", (), ()),
    ("assistant", "openhands:7", "a.txt is listed but unreadable.", None, (), ()),
    (
        "assistant",
        "openhands:8",
        "",
        None,
        (("openhands:8", "finish", '{"final_thought":"Done","outputs":{}}', "complete"),),
        (),
    ),
]


async def _check(store, reader, fixture_copy) -> None:
    path = fixture_copy("openhands/events.json")
    report = await import_openhands(store, path, user_id=USER)
    assert (report.chats_created, report.messages_created, report.tool_calls_created) == (1, 7, 3)
    assert await reader.records(store, USER, "openhands:events.json") == EVENTS
    again = await import_openhands(store, path, user_id=USER)
    assert (again.chats_present, again.messages_present, again.messages_created) == (1, 7, 0)


async def test_event_stream_round_trips(store, reader, fixture_copy):
    await _check(store, reader, fixture_copy)


async def test_event_stream_round_trips_on_servers(server_store, reader, fixture_copy):
    await _check(server_store, reader, fixture_copy)


async def test_skipped_events_and_kept_fields(store, reader, fixture_copy):
    await import_openhands(store, fixture_copy("openhands/events.json"), user_id=USER)
    chat = await store.find_chat(USER, "openhands:events.json")
    assert chat is not None
    assert chat.metadata["openhands"] == {"skipped_events": {"agent_state_changed": 1}}
    messages = await reader.history(store, USER, "openhands:events.json")
    assert messages[3].metadata["openhands"]["extras"] == {
        "command": "ls",
        "metadata": {"exit_code": 0},
    }
    assert messages[3].metadata["openhands"]["cause"] == 3
    assert messages[2].metadata["openhands"]["tool_call_metadata"]["model_response"] == {
        "id": "resp-A",
        "model": "m",
    }
    assert messages[2].tool_calls[1].model_extra == {"openhands": {"event_id": 4, "action": "read"}}


async def test_evaluation_records_are_one_chat_each(store, reader, tmp_path):
    events = [
        {"id": 0, "source": "user", "action": "message", "args": {"content": "hi"}},
        {
            "id": 1,
            "source": "agent",
            "action": "run",
            "args": {"command": "pwd", "thought": "where?"},
        },
        {
            "id": 2,
            "source": "agent",
            "observation": "run",
            "content": "/w",
            "cause": 1,
            "extras": {},
        },
        {"id": 3, "source": "user", "action": "recall", "args": {"query": "hi"}},
        {
            "id": 4,
            "source": "agent",
            "observation": "recall",
            "content": "",
            "cause": 3,
            "extras": {},
        },
    ]
    lines = [
        json.dumps({"instance_id": f"repo__{n}", "history": events, "error": None}) for n in (1, 2)
    ]
    path = tmp_path / "output.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = await import_openhands(store, path, user_id=USER)
    assert report.chats_created == 2
    assert await reader.records(store, USER, "openhands:output.jsonl:repo__2") == [
        ("user", "openhands:0", "hi", None, (), ()),
        (
            "assistant",
            "openhands:1",
            "where?",
            None,
            (("openhands:1", "run", '{"command":"pwd"}', "complete"),),
            (),
        ),
        ("tool", "openhands:2", "/w", "openhands:1", (), ()),
        ("system", "openhands:3", "", None, (), ()),
        ("system", "openhands:4", "", None, (), ()),
    ]
    chat = await store.find_chat(USER, "openhands:output.jsonl:repo__1")
    assert chat is not None
    assert chat.metadata["openhands"]["record"] == {"instance_id": "repo__1"}


async def test_a_file_store_folder_is_one_stream_per_directory(store, reader, tmp_path):
    events = json.loads((FIXTURES / "openhands/events.json").read_text(encoding="utf-8"))
    folder = tmp_path / "sessions" / "abc" / "events"
    folder.mkdir(parents=True)
    for event in events:  # one file per event, as OpenHands' file store keeps them
        (folder / f"{event['id']}.json").write_text(json.dumps(event), encoding="utf-8")
    report = await import_openhands(store, tmp_path / "sessions", user_id=USER)
    assert report.chats_created == 1
    assert await reader.records(store, USER, "openhands:abc/events/") == EVENTS


async def test_history_of_pairs_is_flattened(store, reader, tmp_path):
    action = {"id": 1, "source": "agent", "action": "run", "args": {"command": "ls"}}
    observation = {"id": 2, "source": "agent", "observation": "run", "content": "a", "cause": 1}
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps({"instance_id": "x", "history": [[action, observation]]}))
    await import_openhands(store, path, user_id=USER)
    assert await reader.records(store, USER, "openhands:pairs.json:x") == [
        (
            "assistant",
            "openhands:1",
            "",
            None,
            (("openhands:1", "run", '{"command":"ls"}', "complete"),),
            (),
        ),
        ("tool", "openhands:2", "a", "openhands:1", (), ()),
    ]


@pytest.mark.parametrize(
    ("document", "needles"),
    [
        ([{"id": 0, "action": "run", "args": "ls"}], ("event 0", "args")),
        ({"history": [{"role": "user"}]}, ("event 0", "not an OpenHands event")),
        ({"other": 1}, ("record 0", "'history'")),
    ],
)
async def test_malformed_streams_are_named(store, tmp_path, document, needles):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(InvalidArgument) as caught:
        await import_openhands(store, path, user_id=USER)
    assert "bad.json" in str(caught.value)
    for needle in needles:
        assert needle in str(caught.value)
