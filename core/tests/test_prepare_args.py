"""``Store.prepare`` refuses what is not a message with a typed error."""

from __future__ import annotations

import pytest

from threadkeep import InvalidArgument, Message, open_store


@pytest.mark.parametrize("value", [{"role": "user", "content": "x"}, None, "hello"])
async def test_prepare_refuses_what_is_not_a_message(value):
    # Was a bare AttributeError from deep in the encoder ('dict' object has no 'content').
    async with open_store("memory://prepare-args") as store:
        with pytest.raises(InvalidArgument, match="Message"):
            store.prepare(value)
        prepared = store.prepare(Message(role="user", content="x"))
        assert prepared.message.content == "x"
