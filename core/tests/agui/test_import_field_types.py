"""AG-UI recordings with a field of the wrong JSON type: refused or skipped, never a crash.

A ``role`` that is a list in a text event made the dialect rules raise ``TypeError``
(``unhashable type``), and a request's ``binary`` part with a ``mimeType`` that is a list
raised ``AttributeError``; ``threadkeep import`` reported both as unexpected errors ("this
is a bug", exit status 1). Now the event is an invalid event like any other that does not
validate (skipped and counted in the file's warning), and the request is not a
``RunAgentInput`` (one error line naming the file, exit status 2, nothing written).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from threadkeep import InvalidArgument
from threadkeep.agui import parse_event


def _events(role: object) -> list[dict[str, object]]:
    return [
        {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": role},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "kept"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"},
    ]


@pytest.mark.parametrize("role", [[None], {"x": 1}])
def test_parse_event_refuses_an_unhashable_role_as_invalid(role):
    with pytest.raises(InvalidArgument, match="invalid TEXT_MESSAGE_START event"):
        parse_event({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": role})


def test_an_event_with_a_list_role_is_skipped_with_a_warning(cli, tmp_path: Path, memory_url):
    path = tmp_path / "stream.json"
    path.write_text(json.dumps(_events([None])), encoding="utf-8")
    result = cli("import", str(path), "--format", "agui", "--url", memory_url)
    assert result.exit_code == 0, result.output
    assert "invalid TEXT_MESSAGE_START event" in result.stderr, result.stderr
    counts = cli.json("stats", "--json", "--url", memory_url)
    assert (counts["chats"], counts["messages"]) == (1, 1)  # the streamed text is kept


def test_a_request_part_with_a_list_mime_type_is_refused(cli, tmp_path: Path, memory_url):
    part = {"type": "binary", "mimeType": [None], "url": "https://example.com/a.png"}
    request = {
        "threadId": "t1",
        "runId": "r1",
        "messages": [
            {"id": "u1", "role": "user", "content": [{"type": "text", "text": "hi"}, part]}
        ],
    }
    folder = tmp_path / "run1"
    folder.mkdir()
    (folder / "request.json").write_text(json.dumps(request), encoding="utf-8")
    (folder / "response.json").write_text(json.dumps(_events("assistant")), encoding="utf-8")
    result = cli("import", str(tmp_path), "--format", "agui", "--url", memory_url)
    line = cli.one_line_error(result, "request.json", "not a RunAgentInput")
    assert result.exit_code == 2, line
    assert cli.json("stats", "--json", "--url", memory_url)["chats"] == 0
