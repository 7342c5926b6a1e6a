"""SDK errors as deepactors errors, for :mod:`deepactors.models.anthropic`."""

from __future__ import annotations

import datetime
import email.utils
import importlib
import re
import time
from collections.abc import Mapping
from typing import Final

import anthropic

from deepactors.errors import (
    ContextWindowExceeded,
    ModelAPIError,
    ModelConnectionError,
    OverloadedError,
    RateLimitError,
)

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


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(float(ms) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        # "-0000" means "UTC, zone unknown" (RFC 5322); Python leaves it naive,
        # which .timestamp() would read as local time.
        when = when.replace(tzinfo=datetime.UTC)
    return max(when.timestamp() - time.time(), 0.0)


def _transport_errors() -> tuple[type[Exception], ...]:
    # The SDK wraps transport failures of the request itself in APIConnectionError,
    # but not those raised while a stream is read: those come straight from its HTTP
    # library, which is the httpx fork ``httpx2`` in current SDKs and httpx before.
    found: list[type[Exception]] = []
    for name in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(name).TransportError)
        except ImportError:
            continue
    return tuple(found)


TRANSPORT_ERRORS: Final = _transport_errors()
"""The HTTP library's transport errors, which the SDK does not wrap mid-stream."""


def transport_failure(exc: Exception) -> ModelConnectionError:
    """The error for a transport failure raised while a stream is read."""
    kind = "timed out" if "Timeout" in type(exc).__name__ else "broke off"
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return ModelConnectionError(f"the connection to the Anthropic API {kind}: {detail}")
