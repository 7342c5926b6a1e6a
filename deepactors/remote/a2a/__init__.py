"""A subagent that is another vendor's agent, reached over A2A (``A2AAgent``).

Beside :class:`~deepactors.remote.RemoteAgent` (the Agent Protocol): the
``task`` tool runs an :class:`A2AAgent` where a local subagent would run. See
``docs/a2a.md``. Needs ``httpx`` (``pip install 'deepactors[remote]'``).
"""

from __future__ import annotations

from ..._core.public import publish as _publish
from ._agent import CARD_PATH as CARD_PATH
from ._agent import A2AAgent as A2AAgent
from ._agent import A2AError as A2AError

__all__ = ["CARD_PATH", "A2AAgent", "A2AError"]

_publish(__all__, __name__, globals())
