"""threadkeep: durable, typed, cursor-paginated chat history for AI agents.

Pick a backend by URL and open it::

    from threadkeep import Message, open_store

    async with open_store("sqlite+aiosqlite:///./threadkeep.db") as store:
        chat = await store.create_chat("user-1", "thread-1")
        await store.append_message(chat.chat_id, Message(role="user", content="hi"))
        page = await store.list_messages(chat.chat_id, limit=50)

See ``threadkeep.typing`` for the protocols, ``threadkeep.testing`` for test helpers.
"""

from importlib import metadata as _metadata

from ._archive import (
    Archiver,
    ArchiveRef,
    ArchiveResult,
    FileArchive,
    ObjectInfo,
    open_archiver,
)
from ._capabilities import Capabilities
from ._content import DEFAULT_MAX_MESSAGE_BYTES, MAX_NESTING_DEPTH, PreparedMessage
from ._corrupt import CorruptRow, Unreadable, rebuilt_each, skip_damaged
from ._cursor import CursorCodec
from ._dedup import (
    DEDUPLICATION_KEY_LENGTH,
    chat_deduplication_key,
    normalize_participant_id,
    participant_id,
    session_deduplication_key,
)
from ._driver import NestedKind
from ._errors import (
    ArchiveError,
    ArchiveIntegrityError,
    BackendUnavailable,
    CapabilityNotSupported,
    ChatNotFound,
    Conflict,
    CorruptRecord,
    IdempotencyConflict,
    InvalidArgument,
    InvalidContent,
    InvalidCursor,
    MessageNotFound,
    NotFound,
    PayloadTooLarge,
    RunNotFound,
    SchemaOutdated,
    StepNotFound,
    StorageDamaged,
    StorageFull,
    StorageReadOnly,
    ThreadkeepError,
    UnknownDriver,
)
from ._filters import chat_matches, message_matches
from ._models import (
    ActionPart,
    Boundary,
    Chat,
    ChatStatus,
    CustomPart,
    ErrorPart,
    FilePart,
    ImagePart,
    Message,
    MessageKind,
    MessageStatus,
    Part,
    Reasoning,
    Role,
    Share,
    ToolCall,
)
from ._open import open_store
from ._paging import (
    DEFAULT_PAGE_LIMIT,
    MAX_PAGE_LIMIT,
    ChatFilter,
    MessageFilter,
    Page,
    Viewer,
)
from ._plugins import hookimpl, register_observer, unregister_observer
from ._previews import ChatPreview, MessagePreview
from ._registry import installed_schemes
from ._runs import Run, RunStatus, Step, StepStatus, StepType
from ._schema_migrations import SchemaMigrations, SchemaRevision
from ._settings import DEFAULT_URL, Settings, load_settings
from ._store import Store
from ._store_chat_load import ChatLoad, ChatLoadResult
from ._store_chats import ErasureReceipt
from ._store_context import trim_orphan_tool_results
from ._store_core import as_utc
from ._store_load import LoadReport

# One source for the version: the distribution's metadata, written from core/pyproject.toml.
__version__: str = _metadata.version("threadkeep")

__all__ = [
    "DEDUPLICATION_KEY_LENGTH",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_PAGE_LIMIT",
    "DEFAULT_URL",
    "MAX_NESTING_DEPTH",
    "MAX_PAGE_LIMIT",
    "ActionPart",
    "ArchiveError",
    "ArchiveIntegrityError",
    "ArchiveRef",
    "ArchiveResult",
    "Archiver",
    "BackendUnavailable",
    "Boundary",
    "Capabilities",
    "CapabilityNotSupported",
    "Chat",
    "ChatFilter",
    "ChatLoad",
    "ChatLoadResult",
    "ChatNotFound",
    "ChatPreview",
    "ChatStatus",
    "Conflict",
    "CorruptRecord",
    "CorruptRow",
    "CursorCodec",
    "CustomPart",
    "ErasureReceipt",
    "ErrorPart",
    "FileArchive",
    "FilePart",
    "IdempotencyConflict",
    "ImagePart",
    "InvalidArgument",
    "InvalidContent",
    "InvalidCursor",
    "LoadReport",
    "Message",
    "MessageFilter",
    "MessageKind",
    "MessageNotFound",
    "MessagePreview",
    "MessageStatus",
    "NestedKind",
    "NotFound",
    "ObjectInfo",
    "Page",
    "Part",
    "PayloadTooLarge",
    "PreparedMessage",
    "Reasoning",
    "Role",
    "Run",
    "RunNotFound",
    "RunStatus",
    "SchemaMigrations",
    "SchemaOutdated",
    "SchemaRevision",
    "Settings",
    "Share",
    "Step",
    "StepNotFound",
    "StepStatus",
    "StepType",
    "StorageDamaged",
    "StorageFull",
    "StorageReadOnly",
    "Store",
    "ThreadkeepError",
    "ToolCall",
    "UnknownDriver",
    "Unreadable",
    "Viewer",
    "__version__",
    "as_utc",
    "chat_deduplication_key",
    "chat_matches",
    "hookimpl",
    "installed_schemes",
    "load_settings",
    "message_matches",
    "normalize_participant_id",
    "open_archiver",
    "open_store",
    "participant_id",
    "rebuilt_each",
    "register_observer",
    "session_deduplication_key",
    "skip_damaged",
    "trim_orphan_tool_results",
    "unregister_observer",
]
