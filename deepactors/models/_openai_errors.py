"""SDK errors as deepactors errors, for :mod:`deepactors.models.openai`."""

from __future__ import annotations

import re
from typing import Final

import openai

from deepactors.errors import (
    ContextWindowExceeded,
    ModelAPIError,
    ModelConnectionError,
    OverloadedError,
    RateLimitError,
)

from ._http_errors import parse_retry_after

__all__ = ["error_from_code", "map_error"]

# How OpenAI and the compatible servers word a prompt that does not fit: OpenAI's
# "This model's maximum context length is 128000 tokens...", vLLM's "... longer
# than the maximum model length", llama.cpp's "exceeds the available context size",
# OpenRouter's "maximum context length".
_CONTEXT_OVERFLOW: Final = re.compile(
    r"context[_ ](length|window|size)|maximum model length|too many (input )?tokens"
    r"|prompt is too long|input (is )?too long",
    re.IGNORECASE,
)

_CONTEXT_CODES: Final = frozenset({"context_length_exceeded", "string_above_max_length"})
# A 429 that retrying cannot cure: the account is out of credit.
_NOT_RETRYABLE_429: Final = frozenset({"insufficient_quota", "billing_hard_limit_reached"})


def map_error(exc: openai.APIError, provider: str) -> ModelAPIError:
    """The deepactors error for an SDK error, naming the server's own explanation.

    Args:
        exc: What the SDK raised.
        provider: Who answered, for the message (``"OpenAI"``, ``"Ollama"``, ...).
    """
    if isinstance(exc, openai.APIConnectionError):
        kind = "timed out" if isinstance(exc, openai.APITimeoutError) else "failed"
        return ModelConnectionError(f"connection to the {provider} API {kind}: {exc}")
    if not isinstance(exc, openai.APIStatusError):
        return error_from_code(exc.code or exc.type or "", exc.message, provider=provider)
    status = exc.status_code
    code = exc.code or ""
    detail = _detail(exc)
    retry_after = parse_retry_after(exc.response.headers)
    where = f" (request {exc.request_id})" if exc.request_id else ""
    if status == 429 and code not in _NOT_RETRYABLE_429:
        return RateLimitError(
            f"{provider} API rate limit (429): {detail}{where}",
            status_code=status,
            retry_after=retry_after,
        )
    if status >= 500 or status == 408:
        return OverloadedError(
            f"{provider} API overloaded or failing ({status}): {detail}{where}",
            status_code=status,
            retry_after=retry_after,
        )
    if status in (400, 413, 422) and (code in _CONTEXT_CODES or _CONTEXT_OVERFLOW.search(detail)):
        return ContextWindowExceeded(
            f"the conversation does not fit the model's context window: {detail}{where}",
            status_code=status,
        )
    return ModelAPIError(
        f"the {provider} API rejected the request ({status} {code or exc.type or 'error'}): "
        f"{detail}{where}",
        status_code=status,
    )


def _detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return exc.message


def error_from_code(code: str, message: str, *, provider: str = "OpenAI") -> ModelAPIError:
    """The error for a failure reported inside a response or a stream (no HTTP status)."""
    if code in ("rate_limit_exceeded", "rate_limit_error"):
        return RateLimitError(f"{provider} API rate limit: {message}")
    if code in _CONTEXT_CODES or _CONTEXT_OVERFLOW.search(message):
        return ContextWindowExceeded(
            f"the conversation does not fit the model's context window: {message}"
        )
    if code in ("server_error", "overloaded_error", "api_error", ""):
        return OverloadedError(
            f"{provider} API failed while answering ({code or 'error'}): {message}"
        )
    return ModelAPIError(f"the {provider} API could not answer ({code}): {message}")
