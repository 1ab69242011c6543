"""The SWE-agent importer: ``history`` with tool calls, older trajectories, ``trajectory`` only."""

from __future__ import annotations

import json

import pytest

from threadkeep import InvalidArgument
from threadkeep._importers.swe_agent import import_swe_agent

USER = "u"
TOOLS = [
    ("system", "swe-agent:0", "You are an autonomous programmer.", None, (), ()),
    ("user", "swe-agent:1", "Fix the bug.", None, (), ()),
    (
        "assistant",
        "swe-agent:2",
        "Let me look.",
        None,
        (("call_ls", "bash", '{"command":"ls"}', "complete"),),
        (),
    ),
    ("tool", "swe-agent:3", "setup.py", "call_ls", (), ()),
    ("assistant", "swe-agent:4", "Done.", None, (("call_submit", "submit", "{}", "complete"),), ()),
    ("tool", "swe-agent:5", "diff --git a/x b/x", "call_submit", (), ()),
]
OLD = [
    ("system", "swe-agent:0", "SETTING: you are in a shell.", None, (), ()),
    ("user", "swe-agent:1", "We're solving this issue: crash on start.", None, (), ()),
    ("assistant", "swe-agent:2", "DISCUSSION\nList files.\n```\nls\n```", None, (), ()),
    ("user", "swe-agent:3", "setup.py\n(Open file: n/a)", None, (), ()),
]


async def _check(store, reader, fixture_copy) -> None:
    folder = fixture_copy("swe-agent")
    report = await import_swe_agent(store, folder, user_id=USER)
    assert (report.chats_created, report.messages_created, report.tool_calls_created) == (2, 10, 2)
    assert await reader.threads(store, USER) == [
        "swe-agent:old.traj",
        "swe-agent:run1/inst-1/inst-1.traj",
    ]
    assert await reader.records(store, USER, "swe-agent:run1/inst-1/inst-1.traj") == TOOLS
    assert await reader.records(store, USER, "swe-agent:old.traj") == OLD
    again = await import_swe_agent(store, folder, user_id=USER)
    assert (again.chats_present, again.messages_present, again.messages_created) == (2, 10, 0)


async def test_trajectories_round_trip(store, reader, fixture_copy):
    await _check(store, reader, fixture_copy)


async def test_trajectories_round_trip_on_servers(server_store, reader, fixture_copy):
    await _check(server_store, reader, fixture_copy)


async def test_fields_are_kept(store, reader, fixture_copy):
    await import_swe_agent(store, fixture_copy("swe-agent/run1/inst-1/inst-1.traj"), user_id=USER)
    chat = await store.find_chat(USER, "swe-agent:inst-1.traj")  # a file named directly
    assert chat is not None
    assert chat.metadata["swe_agent"] == {
        "exit_status": "submitted",
        "submission": "diff --git a/x b/x",
        "model_stats": {"api_calls": 2},
    }
    messages = await reader.history(store, USER, "swe-agent:inst-1.traj")
    assert messages[1].metadata == {"swe_agent": {"agent": "main", "message_type": "observation"}}
    assert messages[2].metadata["swe_agent"]["thought"] == "Let me look."


async def test_trajectory_steps_without_history(store, reader, tmp_path):
    steps = [
        {"response": "look", "thought": "look", "action": "ls", "observation": "a.py"},
        {"response": "done", "thought": "done", "action": "submit", "observation": ""},
    ]
    path = tmp_path / "steps.traj"
    path.write_text(json.dumps({"trajectory": steps, "info": {}}), encoding="utf-8")
    await import_swe_agent(store, path, user_id=USER)
    assert await reader.records(store, USER, "swe-agent:steps.traj") == [
        ("assistant", "swe-agent:0", "look", None, (), ()),
        ("user", "swe-agent:1", "a.py", None, (), ()),
        ("assistant", "swe-agent:2", "done", None, (), ()),
        ("user", "swe-agent:3", "", None, (), ()),
    ]


@pytest.mark.parametrize(
    ("document", "needles"),
    [
        ({"info": {}}, ("bad.traj", "no 'history' or 'trajectory'")),
        ({"history": [{"role": "robot", "content": "x"}]}, ("history[0]", "'robot'")),
        ({"history": [{"role": "tool", "content": "x", "tool_call_ids": "c"}]}, ("tool_call_ids",)),
        ({"history": [{"role": "assistant", "tool_calls": [{"id": "c"}]}]}, ("tool call 0",)),
    ],
)
async def test_malformed_trajectories_are_named(store, tmp_path, document, needles):
    (tmp_path / "ok.traj").write_text(json.dumps({"history": []}), encoding="utf-8")
    (tmp_path / "bad.traj").write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(InvalidArgument) as caught:
        await import_swe_agent(store, tmp_path, user_id=USER)
    for needle in needles:
        assert needle in str(caught.value)
    assert (await store.list_chats({"user_id": USER})).items == []  # ok.traj not written either
