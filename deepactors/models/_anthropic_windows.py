"""How many input tokens each Claude model takes: its context window, by model id.

SDK-free, and a table rather than an API call: the Models API reports
``max_input_tokens``, but asking it would cost a request (and a key) before the
first turn, and summarization needs the number when the agent is built.

Source: Anthropic's model pages (platform.claude.com/docs/en/models/...). Every
Claude model in the SDK's list has at least 200k tokens; from the 4.6 generation
on, the window is 1M tokens (Opus 4.6, 4.7, 4.8, Sonnet 4.6, every 5.x model).
An id this table does not know gets 200k, the smallest window of any current
Claude model: summarizing early is safe, summarizing late is not.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["DEFAULT_CONTEXT_WINDOW", "context_window_for"]

DEFAULT_CONTEXT_WINDOW: Final = 200_000
"""The window assumed for a Claude model id the table does not know."""

_MILLION: Final = 1_000_000

# Families with a 1M-token window, matched at the start of the id (so dated ids
# and aliases match too): every 5.x model, and the 4.6+ Opus and Sonnet models.
_ONE_MILLION = re.compile(
    r"^claude-(?:"
    r"(?:opus|sonnet|haiku|fable|mythos)-5(?:$|[-@.])"  # Opus 5, Sonnet 5.5, Haiku 5.5, ...
    r"|opus-4-[6-9](?:$|[-@.])"  # Opus 4.6, 4.7, 4.8
    r"|sonnet-4-[6-9](?:$|[-@.])"  # Sonnet 4.6
    r")"
)


def context_window_for(model_id: str) -> int:
    """The context window of a Claude model id, in tokens.

    ``"claude-sonnet-5-5"`` -> 1,000,000; ``"claude-haiku-4-5-20251001"`` -> 200,000;
    an unknown id -> :data:`DEFAULT_CONTEXT_WINDOW`.
    """
    return _MILLION if _ONE_MILLION.match(model_id) else DEFAULT_CONTEXT_WINDOW
