"""Deprecated: LangChain's and LangGraph's views moved to :mod:`deepactors.langchain.views`.

The one LangChain package holds them now (they still need no ``langchain-core``).
Kept for code written against the old path; warns when imported.
"""

from __future__ import annotations

import warnings

from .langchain.views import STREAM_MODES as STREAM_MODES
from .langchain.views import LangGraphStream as LangGraphStream
from .langchain.views import Namespace as Namespace
from .langchain.views import StreamMode as StreamMode
from .langchain.views import StreamPart as StreamPart
from .langchain.views import content_to_lc as content_to_lc
from .langchain.views import event_to_json as event_to_json
from .langchain.views import interrupts_to_lc as interrupts_to_lc
from .langchain.views import message_from_lc as message_from_lc
from .langchain.views import message_to_lc as message_to_lc
from .langchain.views import messages_to_lc as messages_to_lc
from .langchain.views import namespace_of as namespace_of
from .langchain.views import parse_stream_modes as parse_stream_modes
from .langchain.views import update_to_lc as update_to_lc
from .langchain.views import usage_to_lc as usage_to_lc
from .langchain.views import values_to_lc as values_to_lc

warnings.warn(
    "deepactors.lc_views is deprecated: import from deepactors.langchain.views",
    DeprecationWarning,
    stacklevel=2,
)
