"""SDK errors as deepactors errors, for :mod:`deepactors.models.anthropic`."""

from __future__ import annotations

import re

import anthropic

from deepactors.errors import (
    ContextWindowExceeded,
    ModelAPIError,
    ModelConnectionError,
    OverloadedError,
    RateLimitError,
)

from ._http_errors import TRANSPORT_ERRORS as TRANSPORT_ERRORS
from ._http_errors import parse_retry_after as parse_retry_after
from ._http_errors import transport_failure as _transport_failure

__all__ = ["TRANSPORT_ERRORS", "map_error", "parse_retry_after", "transport_failure"]

# How the API words a prompt that does not fit ("prompt is too long: 215000 tokens >
# 200000 maximum", "input length and `max_tokens` exceed context limit: ...").
_CONTEXT_OVERFLOW = re.compile(
    r"prompt is too long|context (window|limit|length)|exceeds? .*context|too many (input )?tokens",
    re.IGNORECASE,
)


def map_error(exc: anthropic.APIError) -> ModelAPIError:
    """The deepactors error for an SDK error, naming the API's own explanation."""
    if isinstance(exc, anthropic.APIConnectionError):
        kind = "timed out" if isinstance(exc, anthropic.APITimeoutError) else "failed"
        return ModelConnectionError(f"connection to the Anthropic API {kind}: {exc}")
    if not isinstance(exc, anthropic.APIStatusError):
        return ModelAPIError(f"unexpected answer from the Anthropic API: {exc}")
    status = exc.status_code
    error_type = exc.type or ""
    detail = exc.api_message or exc.message
    retry_after = parse_retry_after(exc.response.headers)
    where = f" (request {exc.request_id})" if exc.request_id else ""
    # An error event inside a stream arrives on a 200 response: its body's type
    # says what went wrong.
    if status == 429 or error_type == "rate_limit_error":
        return RateLimitError(
            f"Anthropic API rate limit (429): {detail}{where}",
            status_code=status,
            retry_after=retry_after,
        )
    if status >= 500 or error_type in ("overloaded_error", "api_error"):
        return OverloadedError(
            f"Anthropic API overloaded or failing ({status} {error_type}): {detail}{where}",
            status_code=status,
            retry_after=retry_after,
        )
    if status in (400, 413) and _CONTEXT_OVERFLOW.search(detail):
        return ContextWindowExceeded(
            f"the conversation does not fit the model's context window: {detail}{where}",
            status_code=status,
        )
    return ModelAPIError(
        f"the Anthropic API rejected the request ({status} {error_type or 'error'}): "
        f"{detail}{where}",
        status_code=status,
    )


def transport_failure(exc: Exception) -> ModelConnectionError:
    """The error for a transport failure raised while a stream is read."""
    return _transport_failure(exc, "Anthropic")
