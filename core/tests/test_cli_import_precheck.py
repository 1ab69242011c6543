"""``threadkeep import`` checks every record for what the store would refuse before writing:
NaN and infinity, lone surrogates anywhere (keys too), ids repeated within the file."""

from __future__ import annotations

from pathlib import Path

import pytest

A = '{"messages":[{"role":"user","content":"a"}]}'
B = '{"messages":[{"role":"user","content":"b"}]}'


def stored_chats(cli, url: str) -> int:
    counts: dict[str, int] = cli.json("stats", "--json", "--url", url)
    return counts["chats"]


@pytest.mark.parametrize(
    ("third", "needles"),
    [
        (
            '{"messages":[{"role":"user","content":"c"}], "score": Infinity}',
            ["bad.jsonl: record 2 (line 3)", "record.score", "NaN or infinite"],
        ),
        (
            '{"messages":[{"role":"user","content":"c"}], "nested": {"x": [1, NaN]}}',
            ["bad.jsonl: record 2 (line 3)", "record.nested.x[1]", "NaN or infinite"],
        ),
        (
            '{"messages":[{"role":"user","content":"c"}], "note": "\\udc00"}',
            ["bad.jsonl: record 2 (line 3)", "record.note", "lone UTF-16 surrogate"],
        ),
        (
            '{"messages":[{"role":"user","content":"c","x":{"k\\udc00":1}}]}',
            [
                "bad.jsonl: record 2 (line 3)",
                "record.messages[0].x has a key holding a lone UTF-16 surrogate",
            ],
        ),
        (
            '{"messages":[{"role":"user","content":"c"}], "id": "\\ud800"}',
            ["bad.jsonl: record 2 (line 3)", "record.id", "surrogate"],
        ),
    ],
)
def test_a_value_the_store_refuses_writes_nothing_and_names_record_and_field(
    cli, tmp_path: Path, sqlite_url: str, third: str, needles: list[str]
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(f"{A}\n{B}\n{third}\n", encoding="utf-8")
    result = cli("import", str(path), "--format", "openai", "--url", sqlite_url)
    cli.one_line_error(result, *needles)
    assert result.exit_code == 2
    assert stored_chats(cli, sqlite_url) == 0


@pytest.mark.parametrize(("first", "second"), [('"x"', '"x"'), ("5", '"5"')])
def test_ids_repeated_within_a_file_write_nothing(
    cli, tmp_path: Path, sqlite_url: str, first: str, second: str
) -> None:
    path = tmp_path / "dup.jsonl"
    path.write_text(
        f'{{"id":{first},"messages":[{{"role":"user","content":"a"}}]}}\n'
        f'{{"id":{second},"messages":[{{"role":"user","content":"b"}}]}}\n',
        encoding="utf-8",
    )
    result = cli("import", str(path), "--format", "openai", "--url", sqlite_url)
    line = cli.one_line_error(
        result, "dup.jsonl: record 1 (line 2) has the same id as record 0 (line 1)"
    )
    assert "--user" not in line
    assert result.exit_code == 2
    assert stored_chats(cli, sqlite_url) == 0
