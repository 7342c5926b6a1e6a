"""Webhooks: a run's outcome POSTed to the URL its creator named, once it has ended.

A run created with ``"webhook": "https://..."`` (any run endpoint, and crons)
is POSTed, when it ends in any way, the protocol's ``Run`` with its final
``values`` (or its ``error``), as LangGraph's server does. What this server adds:

* **A signature.** With a secret (``Webhooks(secret=...)``, ``serve
  --webhook-secret``) every request carries
  ``X-Deepactors-Signature: t=<unix seconds>,v1=<hex>``, the HMAC-SHA256 of
  ``"<t>.<body>"`` under the secret, so the receiver can tell the server sent it
  and refuse an old one replayed (:func:`verify_signature` checks both).
  ``X-Deepactors-Delivery`` names the delivery (the same on every retry of it).
* **Retries with backoff.** A connection that fails, a timeout, a 5xx or a 429
  is tried again, after ``backoff`` seconds, then twice that, and so on (a 429's
  ``Retry-After`` is honoured up to ``max_backoff``), ``attempts`` times in all;
  any other answer ends the delivery. Each attempt has ``timeout`` seconds.
  Redirects are not followed.
* **No requests to this machine or its network unless allowed.** A webhook
  must not become a way for an API caller to reach what only the server can
  reach (server-side request forgery): the host is resolved, and every address
  it resolves to must be a public one, unless the host is in ``allowed_hosts``
  (then any address). The request goes to the address that was checked, so a
  name that resolves differently a moment later (DNS rebinding) gains nothing.
  A URL naming a private address outright is refused when the run is created
  (422).

Deliveries are best-effort: they run in the server's task group, a server that
shuts down drops those still waiting for a retry (logged), and with several
server processes the process that ran the run delivers it.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import math
import random
import socket
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import final
from urllib.parse import urlsplit

import anyio

from .._core.logs import get_logger
from ..errors import ConfigurationError, InputError

__all__ = [
    "DEFAULT_WEBHOOKS",
    "SIGNATURE_HEADER",
    "Webhooks",
    "check_webhook_url",
    "sign",
    "verify_signature",
]

_log = get_logger("deepactors.server")

SIGNATURE_HEADER = "X-Deepactors-Signature"
"""The header that carries a delivery's signature (see :func:`sign`)."""

DELIVERY_HEADER = "X-Deepactors-Delivery"

MAX_URL = 2048


@final
@dataclass(frozen=True, kw_only=True)
class Webhooks:
    """How the server calls the webhooks runs name.

    Args:
        secret: Key of the HMAC-SHA256 signature each request carries (see the
            module docstring). None: requests are not signed.
        allowed_hosts: Hosts that may be called whatever they resolve to (this
            machine, the private network): ``"127.0.0.1"``, ``"hooks.internal"``,
            ``"hooks.internal:8443"`` (that port only). Any other host must
            resolve only to public addresses.
        timeout: Seconds one attempt may take, connecting included.
        attempts: Tries in all, the first included.
        backoff: Seconds before the first retry; each next one waits twice as long.
        max_backoff: The most seconds one wait lasts (a ``Retry-After`` included).
        max_body: Bytes of a delivery's JSON beyond which its ``values`` are left
            out (``"values_omitted": true``), so a huge state is not posted.

    Raises:
        ConfigurationError: A setting out of range.
    """

    secret: str | None = None
    allowed_hosts: Sequence[str] = ()
    timeout: float = 10.0
    attempts: int = 5
    backoff: float = 1.0
    max_backoff: float = 60.0
    max_body: int = 4 * 1024 * 1024
    _hosts: frozenset[tuple[str, int | None]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.allowed_hosts, str):
            raise ConfigurationError("webhooks: allowed_hosts is a sequence of host names")
        for name, value in (
            ("timeout", self.timeout),
            ("backoff", self.backoff),
            ("max_backoff", self.max_backoff),
        ):
            if not (isinstance(value, int | float) and 0 <= value < math.inf) or (
                name == "timeout" and value == 0
            ):
                raise ConfigurationError(f"webhooks: {name} must be a finite number of seconds")
        if not isinstance(self.attempts, int) or not 1 <= self.attempts <= 100:
            raise ConfigurationError("webhooks: attempts must be 1 to 100")
        if not isinstance(self.max_body, int) or self.max_body < 1024:
            raise ConfigurationError("webhooks: max_body must be at least 1024 bytes")
        if self.secret is not None and not self.secret:
            raise ConfigurationError("webhooks: an empty secret signs nothing; give None")
        object.__setattr__(self, "_hosts", frozenset(_host_port(h) for h in self.allowed_hosts))

    def allows(self, host: str, port: int) -> bool:
        """Whether ``host:port`` is allowed whatever it resolves to."""
        host = host.lower().strip("[]")
        return (host, None) in self._hosts or (host, port) in self._hosts


DEFAULT_WEBHOOKS = Webhooks()
"""``create_app``'s default: unsigned deliveries to hosts that resolve to public addresses."""


def _host_port(entry: str) -> tuple[str, int | None]:
    entry = entry.strip().lower()
    if not entry:
        raise ConfigurationError("webhooks: an allowed host is empty")
    if entry.startswith("["):  # [::1]:8080
        host, _, rest = entry[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else None
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        if not port.isdigit():
            raise ConfigurationError(f"webhooks: bad allowed host {entry!r}")
        return host, int(port)
    return entry, None


@dataclass(frozen=True, slots=True)
class _Target:
    scheme: str
    host: str
    port: int
    path: str  # with its query


def check_webhook_url(url: object, webhooks: Webhooks | None) -> str:
    """A run's ``webhook`` URL, checked as far as needs no DNS.

    Raises:
        InputError: Not an http(s) URL with a host, too long, credentials in it,
            no webhooks configured... or a literal private address not allowed.
    """
    if webhooks is None:
        raise InputError("webhook: this server calls no webhooks (serve --webhooks to allow them)")
    target = _parse(url)
    if not webhooks.allows(target.host, target.port):
        try:
            address = ipaddress.ip_address(target.host)
        except ValueError:
            if target.host == "localhost" or target.host.endswith(".localhost"):
                raise InputError(_private(target.host)) from None
        else:
            if not address.is_global:
                raise InputError(_private(target.host))
    assert isinstance(url, str)
    return url


def _private(host: str) -> str:
    return (
        f"webhook: {host!r} is this machine or a private network, which webhooks may not "
        "call unless the server allows that host (Webhooks(allowed_hosts=...), serve "
        "--webhook-allow-host)"
    )


def _parse(url: object) -> _Target:
    if not isinstance(url, str) or not url:
        raise InputError("webhook: a URL, like https://example.com/hook")
    if len(url) > MAX_URL:
        raise InputError(f"webhook: a URL of at most {MAX_URL} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InputError(f"webhook: not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"webhook: an http(s) URL with a host, not {url[:100]!r}")
    if parts.username is not None or parts.password is not None:
        raise InputError("webhook: credentials in the URL are not sent; sign with the secret")
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        raise InputError("webhook: the URL has spaces or control characters")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    default = 443 if parts.scheme == "https" else 80
    return _Target(parts.scheme, parts.hostname.lower(), port or default, path)


def sign(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """The signature header's value for ``body``: ``t=<unix seconds>,v1=<hex>``."""
    t = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={digest}"


def verify_signature(
    secret: str, body: bytes, header: str | None, *, tolerance: float = 300.0
) -> bool:
    """Whether ``header`` is a valid signature of ``body`` made in the last ``tolerance`` s.

    For receivers: read the raw body (before parsing it) and the
    :data:`SIGNATURE_HEADER` value.
    """
    if not header:
        return False
    fields = dict(part.partition("=")[::2] for part in header.split(","))
    try:
        t = int(fields.get("t", ""))
    except ValueError:
        return False
    if abs(time.time() - t) > tolerance:
        return False
    expected = sign(secret, body, t).partition(",v1=")[2]
    return hmac.compare_digest(expected, fields.get("v1", ""))


def payload(run: Mapping[str, object], result: Mapping[str, object] | None, max_body: int) -> bytes:
    """What a delivery POSTs: the run, its values (or its error), when it was sent."""
    body: dict[str, object] = dict(run)
    error = None if result is None else result.get("__error__")
    if error is not None:
        body["error"] = error
    elif result is not None:
        body["values"] = {k: v for k, v in result.items() if k != "__error__"}
    body["webhook_sent_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    data = json.dumps(body, separators=(",", ":"), ensure_ascii=False, default=repr).encode()
    if len(data) > max_body and "values" in body:
        body.pop("values")
        body["values_omitted"] = True
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False, default=repr).encode()
    return data


class Refused(Exception):
    """The webhook's host may not be called (it resolved to a private address)."""


async def _resolve(target: _Target, webhooks: Webhooks) -> str:
    """The address to connect to, checked (see the module docstring)."""
    try:
        literal = ipaddress.ip_address(target.host)
    except ValueError:
        literal = None
    if literal is not None:
        if not (literal.is_global or webhooks.allows(target.host, target.port)):
            raise Refused(_private(target.host))
        return str(literal)
    infos = await anyio.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    addresses = [str(info[4][0]) for info in infos]
    if not addresses:
        raise OSError(f"{target.host} has no address")
    if not webhooks.allows(target.host, target.port):
        bad = [a for a in addresses if not ipaddress.ip_address(a.split("%")[0]).is_global]
        if bad:
            raise Refused(_private(f"{target.host} ({bad[0]})"))
    return addresses[0]


async def deliver(
    url: str, body: bytes, webhooks: Webhooks, *, delivery_id: str | None = None
) -> bool:
    """POST ``body`` to ``url`` as a webhook delivery, retrying as configured.

    Returns:
        Whether the receiver accepted it (a 2xx answer). Failures are logged.
    """
    import httpx  # a dependency of anthropic's SDK, so always there; loaded when used

    delivery = delivery_id or str(uuid.uuid4())
    try:
        target = _parse(url)
    except InputError as exc:
        _log.warning("webhook not sent", url=url[:200], why=str(exc))
        return False
    headers = {"Content-Type": "application/json", DELIVERY_HEADER: delivery}
    wait = webhooks.backoff
    async with httpx.AsyncClient(
        timeout=webhooks.timeout, follow_redirects=False, trust_env=False
    ) as client:
        for attempt in range(1, webhooks.attempts + 1):
            why: str
            retry_after: float | None = None
            try:
                with anyio.fail_after(webhooks.timeout):
                    address = await _resolve(target, webhooks)
                    answer = await client.post(
                        _address_url(target, address),
                        content=body,
                        headers={
                            **headers,
                            "Host": _host_header(target),
                            **(
                                {SIGNATURE_HEADER: sign(webhooks.secret, body)}
                                if webhooks.secret
                                else {}
                            ),
                        },
                        extensions={"sni_hostname": target.host}
                        if target.scheme == "https"
                        else {},
                    )
            except Refused as exc:
                _log.warning("webhook not sent", url=url[:200], why=str(exc))
                return False
            except (OSError, TimeoutError, httpx.HTTPError) as exc:
                why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            else:
                if 200 <= answer.status_code < 300:
                    return True
                why = f"answered {answer.status_code}"
                if answer.status_code != 429 and answer.status_code < 500:
                    _log.warning("webhook refused", url=url[:200], why=why)
                    return False
                retry_after = _retry_after(answer.headers.get("retry-after"))
            if attempt == webhooks.attempts:
                _log.warning("webhook not delivered", url=url[:200], attempts=attempt, why=why)
                return False
            pause = retry_after if retry_after is not None else wait * (0.5 + random.random())
            await anyio.sleep(min(pause, webhooks.max_backoff))
            wait *= 2
    return False


def _address_url(target: _Target, address: str) -> str:
    host = f"[{address}]" if ":" in address else address
    return f"{target.scheme}://{host}:{target.port}{target.path}"


def _host_header(target: _Target) -> str:
    host = f"[{target.host}]" if ":" in target.host else target.host
    default = 443 if target.scheme == "https" else 80
    return host if target.port == default else f"{host}:{target.port}"


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if 0 <= seconds < math.inf else None
