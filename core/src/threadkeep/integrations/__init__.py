"""Threadkeep as the history backend of agent frameworks (see ``docs/integrations.md``).

Each framework has a subpackage, imported only when you import it, and an extra that
installs the framework at the version its tests ran on:

- ``threadkeep.integrations.openai_agents`` (``threadkeep[openai-agents]``): ``ThreadkeepSession``.
- ``threadkeep.integrations.langchain`` (``threadkeep[langchain]``):
  ``ThreadkeepChatMessageHistory``.
- ``threadkeep.integrations.pydantic_ai`` (``threadkeep[pydantic-ai]``):
  ``ThreadkeepMessageHistory``.
"""

__all__: list[str] = []
