"""The Claude Code importer: the fixture session round-trips into the records stated here.

The fixture (``fixtures/claude-code/proj/s1.jsonl`` and its subagent) holds one API message
spread over three lines with parallel tool calls (one result hanging off a sibling line), a
``tool_result`` with ``is_error``, a retried answer (a fork), ``progress`` and
``file-history-snapshot`` lines, a ``Task`` call answered by a subagent, a compaction
boundary followed by its summary line, a multi-block user prompt and redacted thinking.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from threadkeep import InvalidArgument, InvalidContent, PayloadTooLarge, open_store
from threadkeep._importers.claude_code import import_claude_code

SESSION = "claude-code/proj/s1.jsonl"
USER = "u"
SUMMARY = (
    "This session is being continued from a previous conversation. "
    "Summary: listed files; README missing; src holds main.py."
)
LS_ARGS = '{"command":"ls -la","timeout":1.5e-7,"description":"List files ✓"}'
READ_ARGS = '{"file_path":"/w/app/README.md","limit":0.00001}'
TASK_ARGS = (
    '{"description":"Explore src","prompt":"Explore src and report.","subagent_type":"Explore"}'
)
MAIN = [
    ("user", "u1", "List the files, then read README.", None, (), ()),
    (
        "assistant",
        "msg_1",
        "",
        None,
        (
            ("toolu_ls", "Bash", LS_ARGS, "complete"),
            ("toolu_read", "Read", READ_ARGS, "errored"),
        ),
        (("Two tools at once.", "sig-AAA"),),
    ),
    ("tool", "r1#0", "README.md\nsrc", "toolu_ls", (), ()),
    ("tool", "r2#0", "File does not exist.", "toolu_read", (), ()),
    ("assistant", "msg_3", "There is no README; src/ holds the code.", None, (), ()),
    ("user", "u2", "Ask a subagent to explore src.", None, (), ()),
    ("assistant", "msg_4", "", None, (("toolu_task", "Task", TASK_ARGS, "complete"),), ()),
    ("tool", "r3#0", "src holds main.py.", "toolu_task", (), ()),
    ("assistant", "msg_5", "src holds main.py.", None, (), ()),
    ("boundary", "compaction", "c1", SUMMARY),
    ("user", "u4", "Thanks. Done for today.", None, (), ()),
    ("assistant", "msg_6", "Bye!", None, (), (("", "ENCRYPTED=="),)),
]
BRANCH = [("assistant", "msg_2", "README is missing.", None, (), ())]
SUBAGENT = [
    ("user", "s-u1", "Explore src and report.", None, (), ()),
    (
        "assistant",
        "msg_s1",
        "",
        None,
        (("toolu_glob", "Glob", '{"pattern":"src/**"}', "complete"),),
        (),
    ),
    ("tool", "s-r1#0", "src/main.py", "toolu_glob", (), ()),
    ("assistant", "msg_s2", "src holds main.py.", None, (), ()),
]
THREADS = ["claude-code:s1", "claude-code:s1#branch-a4", "claude-code:s1/agent-ab12"]


async def _check_fixture(store, reader, path: Path) -> None:
    report = await import_claude_code(store, path, user_id=USER)
    assert report.as_dict() == {
        "chats": 3,
        "messages": 17,
        "tool_calls": 4,
        "chats_created": 3,
        "chats_present": 0,
        "messages_created": 17,
        "messages_present": 0,
        "tool_calls_created": 4,
        "tool_calls_present": 0,
    }
    assert await reader.threads(store, USER) == sorted(THREADS)
    assert await reader.records(store, USER, "claude-code:s1") == MAIN
    assert await reader.records(store, USER, "claude-code:s1#branch-a4") == BRANCH
    assert await reader.records(store, USER, "claude-code:s1/agent-ab12") == SUBAGENT
    again = await import_claude_code(store, path, user_id=USER)
    assert (again.chats_created, again.messages_created, again.tool_calls_created) == (0, 0, 0)
    assert (again.chats_present, again.messages_present, again.tool_calls_present) == (3, 17, 4)


async def test_session_round_trips(store, reader, fixture_copy):
    await _check_fixture(store, reader, fixture_copy("claude-code/proj") / "s1.jsonl")


async def test_session_round_trips_on_servers(server_store, reader, fixture_copy):
    await _check_fixture(server_store, reader, fixture_copy("claude-code/proj") / "s1.jsonl")


async def test_links_metadata_and_boundary(store, reader, fixture_copy):
    await import_claude_code(store, fixture_copy("claude-code/proj") / "s1.jsonl", user_id=USER)
    main = await reader.history(store, USER, "claude-code:s1")
    chat = await store.find_chat(USER, "claude-code:s1")
    assert chat is not None
    details = chat.metadata["claude_code"]
    assert details["skipped_lines"] == {"file-history-snapshot": 1, "progress": 2, "summary": 1}
    assert details["branches"] == ["claude-code:s1#branch-a4"]
    assert (details["sessionId"], details["cwd"], details["gitBranch"]) == ("s1", "/w/app", "main")
    assert chat.name == "Explore the app"  # the summary line naming the leaf
    by_id = {m.agui_id: m for m in main}
    # Three lines of one API message fold into one; the final usage gives the tokens.
    assert by_id["msg_1"].metadata["claude_code"]["uuids"] == ["a1", "a2", "a3"]
    assert by_id["msg_1"].tokens == 42
    assert by_id["r2#0"].metadata["claude_code"]["is_error"] is True
    assert by_id["r1#0"].metadata["claude_code"]["toolUseResult"]["stdout"] == "README.md\nsrc"
    task_call = by_id["msg_4"].tool_calls[0]
    assert task_call.model_extra == {"subagent_thread_id": "claude-code:s1/agent-ab12"}
    boundary = by_id["c1"]
    assert boundary.boundary is not None
    assert boundary.boundary.upto_seq == by_id["msg_5"].seq
    assert boundary.metadata["claude_code"]["compactMetadata"] == {
        "trigger": "manual",
        "preTokens": 1234,
    }
    assert boundary.metadata["claude_code"]["summary_line"]["uuid"] == "u3"
    context = await store.context_messages(chat.chat_id)
    assert [m.agui_id for m in context] == ["c1", "u4", "msg_6"]
    branch = await store.find_chat(USER, "claude-code:s1#branch-a4")
    assert branch is not None
    assert branch.metadata["claude_code"]["fork_after"] == "r2"
    assert branch.metadata["claude_code"]["branch_of"] == "claude-code:s1"
    sub = await store.find_chat(USER, "claude-code:s1/agent-ab12")
    assert sub is not None
    assert sub.metadata["claude_code"]["parent_tool_call_id"] == "toolu_task"
    assert sub.metadata["claude_code"]["parent_thread_id"] == "claude-code:s1"


def test_arguments_are_the_exact_text_of_the_line():
    text = (Path(__file__).parent / "fixtures" / SESSION).read_text(encoding="utf-8")
    for arguments in (LS_ARGS, READ_ARGS, TASK_ARGS):
        assert f'"input":{arguments}' in text


def _line(**fields) -> str:
    base = {"sessionId": "big", "isSidechain": False, "cwd": "/w", "version": "2.1.0"}
    return json.dumps({**base, **fields}, ensure_ascii=False, separators=(",", ":"))


def _prompt(uuid: str, parent: str | None, text: str) -> str:
    return _line(
        type="user", uuid=uuid, parentUuid=parent, message={"role": "user", "content": text}
    )


def _answer(uuid: str, parent: str, message_id: str, blocks: list) -> str:
    message = {"id": message_id, "role": "assistant", "content": blocks}
    return _line(type="assistant", uuid=uuid, parentUuid=parent, message=message)


async def test_long_lines_and_edited_prompts(store, reader, tmp_path):
    output = "x" * 300_000 + "é"
    result = {"type": "tool_result", "tool_use_id": "t1", "content": output}
    call = {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/big"}}
    lines = [
        _prompt("p1", None, "read it"),
        _answer("a1", "p1", "m1", [call]),
        _line(
            type="user",
            uuid="r1",
            parentUuid="a1",
            message={"role": "user", "content": [result]},
            toolUseResult={"file": {"content": output}},
        ),
        _answer("a2", "r1", "m2", [{"type": "text", "text": "done"}]),
        _prompt("p2", "a2", "first wording"),
        _answer("a3", "p2", "m3", [{"type": "text", "text": "answer one"}]),
        _prompt("p3", "a2", "second wording"),  # the prompt edited: a sibling of p2
        _answer("a4", "p3", "m4", [{"type": "text", "text": "answer two"}]),
    ]
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert len(lines[2].encode()) > 200_000
    await import_claude_code(store, path, user_id=USER)
    assert await reader.records(store, USER, "claude-code:big") == [
        ("user", "p1", "read it", None, (), ()),
        ("assistant", "m1", "", None, (("t1", "Read", '{"file_path":"/big"}', "complete"),), ()),
        ("tool", "r1#0", output, "t1", (), ()),
        ("assistant", "m2", "done", None, (), ()),
        ("user", "p3", "second wording", None, (), ()),
        ("assistant", "m4", "answer two", None, (), ()),
    ]
    tool = (await reader.history(store, USER, "claude-code:big"))[2]
    size = len(json.dumps({"file": {"content": output}}, ensure_ascii=False, separators=(",", ":")))
    omitted = {"bytes": size + 1, "keys": ["file"]}  # "é" is two bytes of UTF-8
    assert tool.metadata["claude_code"]["toolUseResult_omitted"] == omitted
    assert await reader.records(store, USER, "claude-code:big#branch-p2") == [
        ("user", "p2", "first wording", None, (), ()),
        ("assistant", "m3", "answer one", None, (), ()),
    ]


async def test_an_api_error_message_is_errored(store, reader, tmp_path):
    failed = json.loads(_answer("a1", "p1", "m1", [{"type": "text", "text": "API Error: 529"}]))
    lines = [_prompt("p1", None, "hi"), json.dumps(failed | {"isApiErrorMessage": True})]
    (tmp_path / "e.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    await import_claude_code(store, tmp_path / "e.jsonl", user_id=USER)
    answer = (await reader.history(store, USER, "claude-code:e"))[1]
    assert (answer.content, answer.status.value) == ("API Error: 529", "errored")


async def test_repeated_lines_are_counted_or_kept_apart(store, reader, tmp_path):
    answer = _answer("a1", "p1", "m1", [{"type": "text", "text": "one"}])
    other = _answer("a1", "p1", "m9", [{"type": "text", "text": "other"}])
    lines = [_prompt("p1", None, "hi"), answer, answer, other]
    (tmp_path / "d.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    await import_claude_code(store, tmp_path / "d.jsonl", user_id=USER)
    assert await reader.records(store, USER, "claude-code:d") == [
        ("user", "p1", "hi", None, (), ()),
        ("assistant", "m9", "other", None, (), ()),
    ]
    assert await reader.records(store, USER, "claude-code:d#branch-a1") == [
        ("assistant", "m1", "one", None, (), ())
    ]
    chat = await store.find_chat(USER, "claude-code:d")
    assert chat is not None
    assert chat.metadata["claude_code"]["skipped_lines"] == {"duplicate": 1}


async def test_old_layout_subagent_is_linked_by_its_prompt(store, reader, tmp_path):
    task = {"type": "tool_use", "id": "tk", "name": "Task", "input": {"prompt": "look around"}}
    result = {"type": "tool_result", "tool_use_id": "tk", "content": "seen"}
    (tmp_path / "main.jsonl").write_text(
        "\n".join(
            [
                _prompt("p1", None, "delegate"),
                _answer("a1", "p1", "m1", [task]),
                _line(
                    type="user",
                    uuid="r1",
                    parentUuid="a1",
                    message={"role": "user", "content": [result]},
                ),
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    side = json.loads(_prompt("s1", None, "look around")) | {
        "isSidechain": True,
        "sessionId": "main",
    }
    (tmp_path / "agent-77.jsonl").write_text(json.dumps(side) + "\n", encoding="utf-8")
    report = await import_claude_code(store, tmp_path, user_id=USER)  # the project folder
    assert report.chats_created == 2
    sub = await store.find_chat(USER, "claude-code:main/agent-77")
    assert sub is not None
    assert sub.metadata["claude_code"]["parent_tool_call_id"] == "tk"
    (parent_call,) = [
        c for m in await reader.history(store, USER, "claude-code:main") for c in m.tool_calls
    ]
    assert parent_call.model_extra == {"subagent_thread_id": "claude-code:main/agent-77"}


async def test_inline_sidechain_lines_become_subagent_chats(store, reader, tmp_path):
    task = {"type": "tool_use", "id": "tk", "name": "Task", "input": {"prompt": "dig"}}
    result = {"type": "tool_result", "tool_use_id": "tk", "content": "dug"}
    side = {"isSidechain": True}
    lines = [
        _prompt("p1", None, "delegate"),
        _answer("a1", "p1", "m1", [task]),
        json.dumps(json.loads(_prompt("s1", "a1", "dig")) | side),
        json.dumps(json.loads(_answer("s2", "s1", "ms", [{"type": "text", "text": "dug"}])) | side),
        _line(
            type="user", uuid="r1", parentUuid="s2", message={"role": "user", "content": [result]}
        ),
        _answer("a2", "r1", "m2", [{"type": "text", "text": "it dug"}]),
    ]
    (tmp_path / "old.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    await import_claude_code(store, tmp_path / "old.jsonl", user_id=USER)
    assert await reader.threads(store, USER) == [
        "claude-code:old",
        "claude-code:old/agent-sidechain-s1",
    ]
    assert [m.agui_id for m in await reader.history(store, USER, "claude-code:old")] == [
        "p1",
        "m1",
        "r1#0",
        "m2",
    ]
    assert await reader.records(store, USER, "claude-code:old/agent-sidechain-s1") == [
        ("user", "s1", "dig", None, (), ()),
        ("assistant", "ms", "dug", None, (), ()),
    ]
    sub = await store.find_chat(USER, "claude-code:old/agent-sidechain-s1")
    assert sub is not None
    assert sub.metadata["claude_code"]["parent_tool_call_id"] == "tk"  # by its prompt


@pytest.mark.parametrize(
    ("bad_line", "needles"),
    [
        ("{not json", ("s.jsonl: line 2", "not JSON")),
        ('"a string"', ("s.jsonl: line 2", "not a JSON object")),
        (
            _answer("a1", "p1", "m1", [{"type": "tool_use", "name": "Read", "input": {}}]),
            ("s.jsonl: line 2", "message.content[0].id"),
        ),
        (_line(type="assistant", uuid="a1", parentUuid="p1"), ("s.jsonl: line 2", "'message'")),
        (
            _prompt("p2", "p1", "x").replace('"x"', '"\\ud800"'),
            ("s.jsonl: line 2", "message.content", "surrogate"),
        ),
    ],
)
async def test_a_bad_line_writes_nothing_and_is_named(store, tmp_path, bad_line, needles):
    path = tmp_path / "s.jsonl"
    path.write_text(_prompt("p1", None, "hello") + "\n" + bad_line + "\n", encoding="utf-8")
    with pytest.raises((InvalidArgument, InvalidContent)) as caught:
        await import_claude_code(store, path, user_id=USER)
    for needle in needles:
        assert needle in str(caught.value)
    assert (await store.list_chats({"user_id": USER})).items == []


@pytest.mark.parametrize(
    "text",
    [
        '[\n  {"messages": []}\n]\n',  # a JSON document, not JSON Lines
        '{"messages": [{"role": "user", "content": "hi"}]}\n',  # JSON Lines of another format
    ],
)
async def test_another_format_is_refused_with_a_hint(store, tmp_path, text):
    path = tmp_path / "other.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InvalidArgument, match="--format auto tells formats apart"):
        await import_claude_code(store, path, user_id=USER)


async def test_a_message_over_the_limit_is_named_by_its_line(tmp_path):
    lines = [_prompt("p1", None, "short"), _prompt("p2", "p1", "y" * 5000)]
    (tmp_path / "l.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    async with open_store("memory://", max_message_bytes=1000) as small:
        with pytest.raises(PayloadTooLarge, match=r"l\.jsonl: line 2: message payload"):
            await import_claude_code(small, tmp_path / "l.jsonl", user_id=USER)
        assert (await small.list_chats({"user_id": USER})).items == []


async def test_progress_counts_chats(store, fixture_copy):
    calls: list[tuple[int, int]] = []
    path = fixture_copy("claude-code/proj") / "s1.jsonl"
    await import_claude_code(store, path, user_id=USER, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(0, 3), (1, 3), (2, 3), (3, 3)]
