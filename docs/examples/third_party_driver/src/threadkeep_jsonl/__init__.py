"""threadkeep-jsonl: threadkeep chat history in an append-only JSON-lines file.

A worked example of a third-party threadkeep driver (``docs/writing-a-driver.md``)::

    from threadkeep import Message, open_store

    async with open_store("jsonl:///var/lib/my-agent/chats") as store:
        chat = await store.create_chat("user-1", "thread-1")
        await store.append_message(chat.chat_id, Message(role="user", content="hi"))

The driver registers itself in the ``threadkeep`` entry-point group (``plugin.py``), so
installing the package is all ``open_store`` needs.
"""

from ._log import LOCK_NAME, LOG_NAME
from ._store import JsonlDriver

__version__ = "0.1.0"

__all__ = ["LOCK_NAME", "LOG_NAME", "JsonlDriver", "__version__"]
