"""The one-line error of an integration whose framework is not installed."""

from __future__ import annotations

import importlib

__all__ = ["require_framework"]


def require_framework(module: str, framework: str, extra: str) -> None:
    """Import ``module`` or raise an ``ImportError`` that names the extra to install.

    Args:
        module: The framework's import name (``"agents"``).
        framework: Its human name (``"the OpenAI Agents SDK"``).
        extra: The threadkeep extra that installs it (``"openai-agents"``).

    Raises:
        ModuleNotFoundError: If ``module`` cannot be imported; one line, for example
            ``threadkeep.integrations.openai_agents needs the OpenAI Agents SDK: pip install
            'threadkeep[openai-agents]'``.
    """
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        where = f"threadkeep.integrations.{extra.replace('-', '_')}"
        msg = f"{where} needs {framework}: pip install 'threadkeep[{extra}]'"
        raise ModuleNotFoundError(msg, name=exc.name) from None
