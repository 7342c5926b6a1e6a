"""SDK-free pieces of error mapping that every HTTP model adapter shares.

Kept apart from the adapters so that one provider's adapter never loads another
provider's SDK: ``retry-after`` parsing, and the HTTP library's transport errors,
which the SDKs do not wrap when they are raised while a stream is read.
"""

from __future__ import annotations

import datetime
import email.utils
import importlib
import time
from collections.abc import Mapping
from typing import Final

from deepactors.errors import ModelConnectionError

__all__ = ["TRANSPORT_ERRORS", "parse_retry_after", "transport_failure"]


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
    # The SDKs wrap transport failures of the request itself in their
    # APIConnectionError, but not those raised while a stream is read: those come
    # straight from their HTTP library, the httpx fork ``httpx2`` in current SDKs
    # and httpx before.
    found: list[type[Exception]] = []
    for name in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(name).TransportError)
        except ImportError:
            continue
    return tuple(found)


TRANSPORT_ERRORS: Final = _transport_errors()
"""The HTTP library's transport errors, which the SDKs do not wrap mid-stream."""


def transport_failure(exc: Exception, provider: str) -> ModelConnectionError:
    """The error for a transport failure raised while ``provider``'s stream is read."""
    kind = "timed out" if "Timeout" in type(exc).__name__ else "broke off"
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return ModelConnectionError(f"the connection to the {provider} API {kind}: {detail}")
