"""``threadkeep import`` of one record over a backend's own batch limit (the memory service
holds 200 events per call): the record is one all-or-nothing batch on every backend."""

from __future__ import annotations

from uuid import uuid4

import pytest

pytest.importorskip("threadkeep_memservice", reason="needs the threadkeep-memservice driver")


@pytest.mark.parametrize("scheme", ["memservice", "memory"])
def test_a_300_message_record_imports_whole(cli, transcripts, scheme: str) -> None:
    url = f"{scheme}://big-record-{uuid4().hex}"  # named: it outlives each command
    path = transcripts.write("long.json", [transcripts.record(75)])  # 301 messages
    report = cli.json("import", str(path), "--format", "openai", "--json", "--url", url)
    assert (report["messages"], report["messages_created"], report["tool_calls"]) == (301, 301, 75)
    assert cli.json("stats", "--json", "--url", url) == {
        "chats": 1,
        "messages": 301,
        "tool_calls": 75,
    }
    again = cli.json("import", str(path), "--format", "openai", "--json", "--url", url)
    assert (again["messages_created"], again["messages_present"]) == (0, 301)
