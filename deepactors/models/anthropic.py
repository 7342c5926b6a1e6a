"""Claude over the Anthropic Python SDK (``anthropic.AsyncAnthropic``).

:class:`AnthropicModel` implements :class:`~deepactors.models.ChatModel`. The SDK
runs on asyncio and trio alike (its HTTP stack is built on anyio), and so does
everything here.

Default model
    :data:`DEFAULT_MODEL` is ``"claude-sonnet-5-5"``: the newest Sonnet in the
    installed SDK's model list (``anthropic.types.Model``), the model the SDK's own
    helpers use, and not on its deprecation list. Sonnet is the balance of
    capability, speed and price an agent harness wants by default; pass
    ``"anthropic:claude-opus-5-5"`` (or any id) to choose another.

How a request is built, lowest precedence first:
    1. The model's own options: ``model_id``, ``max_tokens``, ``temperature``.
    2. ``**request_options`` given to the constructor: any Messages API body field
       (``thinking``, ``top_k``, ``metadata``, ``tool_choice``, ...), sent
       verbatim. Two are SDK options instead of body fields: ``extra_headers``
       and ``timeout``.
    3. ``ModelRequest.settings`` of the call, where only these keys are read
       (anything else is meant for another model or middleware and ignored):
       ``max_tokens``, ``temperature``, ``top_p``, ``top_k``,
       ``stop_sequences``, ``thinking``, ``tool_choice``, ``metadata``,
       ``service_tier``, ``output_config``; ``"anthropic_options"``: a mapping of
       further body fields sent verbatim; and ``"anthropic_cache"``
       (:data:`CACHE_SETTING`): a :class:`CacheSettings` that asks for prompt
       cache breakpoints. :class:`~deepactors.middleware.AnthropicPromptCachingMiddleware`
       writes that key; because no other model reads it, the middleware is a
       no-op for them. Breakpoints are placed when the body is built (our message
       types carry no ``cache_control``), on the last tool, the system prompt and
       the newest user turns, never more than the API's limit of 4.

    Two fields are joined rather than replaced: a ``system`` option (a string or
    a list of blocks) comes after the request's system prompt and system
    messages, and a ``tools`` option (server tools such as web search) after
    the request's tools. Options are copied into each body, never changed.

Structured output
    ``settings[STRUCTURED_OUTPUT]`` (a JSON schema, written by ``response_format``
    when it uses the native strategy) becomes ``output_config.format``
    (``{"type": "json_schema", "schema": ...}``, the schema made strict by the SDK's
    ``transform_schema``), beside any other ``output_config`` field. The final
    answer's text is then JSON that matches the schema. Models before Claude 4.5
    (``claude-3*``, ``claude-opus-4-0``/``-4-1``, ``claude-sonnet-4-0``, dated 4.0
    ids) do not support it; for them ``native_structured_output`` is False and
    ``response_format`` uses a tool instead.

Errors
    SDK errors become deepactors errors: 429 -> :class:`~deepactors.errors.RateLimitError`
    and 529/5xx (or an ``overloaded_error`` event in a stream) ->
    :class:`~deepactors.errors.OverloadedError`, both with ``retry_after`` from the
    ``retry-after`` header; a connection that fails, breaks off midway or times out
    while being read -> :class:`~deepactors.errors.ModelConnectionError` (all three
    retried by ``ModelRetryMiddleware``); a 400 that says the prompt is
    too long -> :class:`~deepactors.errors.ContextWindowExceeded`; any other
    rejection -> :class:`~deepactors.errors.ModelAPIError` quoting the API's
    message. An answer that stopped with ``model_context_window_exceeded`` raises
    :class:`~deepactors.errors.ContextWindowExceeded` too (its partial content is
    dropped: summarization has to make room first). Every other stop reason is
    kept on ``AssistantMessage.stop_reason`` as the API names it: ``end_turn``,
    ``tool_use``, ``max_tokens``, ``stop_sequence``, and also ``refusal`` (the
    model declined; the content says so, and retrying the same request will not
    help) and ``pause_turn`` (a long server-tool turn was paused; sending the
    conversation back as it is lets the model continue). The SDK's own retries
    are off (``max_retries=0``) so that retrying is done, visibly, by
    :class:`~deepactors.middleware.ModelRetryMiddleware`.

Concurrency
    Every request holds a slot of the model's :class:`RequestLimiter` (16 by
    default, ``max_concurrent_requests=``), shared by every actor that uses this
    model instance; pass ``limiter=`` to share one across instances. A call that
    had to wait for its slot tells the run's listeners with a
    :class:`~deepactors.events.CustomEvent` whose ``data`` is ``{"type":
    "model_request_queued", "model", "waited" (seconds), "in_flight", "waiting"}``.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import AsyncGenerator, Mapping
from typing import Any, ClassVar, Final, cast, final

import anthropic
import anyio
import anyio.to_thread
from anyio.abc import AsyncResource

from deepactors._core.perloop import PerLoop
from deepactors.errors import (
    ConfigurationError,
    ContextWindowExceeded,
    ModelAPIError,
)
from deepactors.messages import AssistantMessage

from ._anthropic_convert import (
    CACHE_SETTING,
    MAX_CACHE_BREAKPOINTS,
    CacheSettings,
    apply_cache_breakpoints,
    message_from_api,
    messages_to_api,
    output_format_to_api,
    supports_structured_output,
    system_option_to_api,
    system_to_api,
    tools_to_api,
)
from ._anthropic_errors import TRANSPORT_ERRORS, map_error, transport_failure
from ._anthropic_stream import StreamAccumulator
from ._anthropic_windows import context_window_for
from ._base import STRUCTURED_OUTPUT, ModelRequest, StreamPart
from ._limiter import RequestLimiter, RequestLimiterStatistics
from .profiles import ModelProfile, profile_for

__all__ = [
    "CACHE_SETTING",
    "DEFAULT_MAX_CONCURRENT_REQUESTS",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_MODEL",
    "MAX_CACHE_BREAKPOINTS",
    "AnthropicModel",
    "CacheSettings",
    "RequestLimiter",
    "RequestLimiterStatistics",
]

DEFAULT_MODEL: Final = "claude-sonnet-5-5"
"""The model id used when none is given (see the module docstring for why)."""

DEFAULT_MAX_TOKENS: Final = 16_384
"""Output limit per call. Kept below the ~21k above which :meth:`AnthropicModel.generate`
has to stream (the SDK refuses such a plain request without an explicit ``timeout``)."""

DEFAULT_MAX_CONCURRENT_REQUESTS: Final = 16

SETTINGS_KEYS: Final = frozenset(
    {
        "max_tokens",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "thinking",
        "tool_choice",
        "metadata",
        "service_tier",
        "output_config",
    }
)
"""The ``ModelRequest.settings`` keys that go into the request body as they are."""

_SDK_OPTIONS: Final = ("extra_headers", "timeout")


# Above this, the SDK's plain (non-streaming) request would be expected to outlast its
# 10-minute default timeout and is refused: 3600 s * max_tokens / 128_000 > 600 s.
_PLAIN_MAX_TOKENS: Final = 21_333


@final
class AnthropicModel(AsyncResource):
    """Claude through ``anthropic.AsyncAnthropic``.

    Args:
        model_id: A Claude model id (``"claude-sonnet-5-5"``, ...).
        max_tokens: Output limit per call, unless a request's settings say otherwise.
        temperature: Sampling temperature; ``None`` leaves the API's default.
        client: A ready SDK client to use (then ``api_key``, ``base_url``,
            ``timeout`` and ``max_retries`` are ignored, and closing it is yours).
            Like every httpx client it belongs to the event loop it is first used in.
        api_key: The API key; default: ``ANTHROPIC_API_KEY`` from the environment.
        base_url: Another endpoint (a proxy, a test server); default:
            ``ANTHROPIC_BASE_URL`` or the public API.
        timeout: Seconds per HTTP request; default: the SDK's (10 minutes).
        max_retries: Retries inside the SDK. 0 by default: retries belong to
            :class:`~deepactors.middleware.ModelRetryMiddleware`, where they are
            visible and honour deadlines.
        limiter: A :class:`RequestLimiter` to share with other models.
        max_concurrent_requests: The size of this model's own limiter when
            ``limiter`` is not given.
        native_structured_output: Whether the model takes a JSON schema for its
            answer (``output_config.format``); default: by the model id.
        profile: The model's :class:`~deepactors.models.profiles.ModelProfile`
            (context window, prices: each answer's ``usage.cost_usd``); default:
            looked up by ``model_id``.
        **request_options: Further Messages API fields sent with every request
            (``thinking={...}``, ``top_k=...``), plus the SDK options
            ``extra_headers`` and ``timeout``.

    The client this model makes itself is made lazily, once per event loop, so one
    model can serve successive ``anyio.run`` calls (the sync ``invoke``); close it
    with :meth:`aclose` or ``async with model:``.
    """

    prompt_caching: ClassVar[bool] = True
    """Reads the ``anthropic_cache`` setting of :class:`AnthropicPromptCachingMiddleware`."""

    def __init__(
        self,
        model_id: str = DEFAULT_MODEL,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float | None = None,
        client: anthropic.AsyncAnthropic | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        max_retries: int = 0,
        limiter: RequestLimiter | None = None,
        max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS,
        native_structured_output: bool | None = None,
        profile: ModelProfile | None = None,
        **request_options: Any,
    ) -> None:
        if not model_id:
            raise ConfigurationError("model_id must not be empty")
        if max_tokens < 1:
            raise ConfigurationError(f"max_tokens must be >= 1, not {max_tokens}")
        self._model_id = model_id
        self.max_tokens = max_tokens
        self.temperature = temperature
        self._user_client = client
        self._client_args: dict[str, Any] = {"max_retries": max_retries}
        if api_key is not None:
            self._client_args["api_key"] = api_key
        if base_url is not None:
            self._client_args["base_url"] = base_url
        if timeout is not None:
            self._client_args["timeout"] = timeout
        # A client belongs to the event-loop run that made it (its connections
        # do): one per live run, closed by that run as it ends. Several threads'
        # loops may use one model at once, each with its own client.
        self._own_clients: PerLoop[anthropic.AsyncAnthropic] = PerLoop(
            self._make_client, _close_client
        )
        self.limiter = limiter if limiter is not None else RequestLimiter(max_concurrent_requests)
        self._sdk_options = {
            k: request_options.pop(k) for k in _SDK_OPTIONS if k in request_options
        }
        self.request_options: dict[str, Any] = request_options
        if native_structured_output is None:
            native_structured_output = supports_structured_output(model_id)
        self.native_structured_output = native_structured_output
        self.profile = profile if profile is not None else profile_for(model_id)
        self._prices = None if self.profile is None else self.profile.prices

    @property
    def model_name(self) -> str:
        """The model id, as sent to the API."""
        return self._model_id

    @property
    def context_window(self) -> int:
        """The model's context window in tokens: its profile's, else by its id
        (see ``_anthropic_windows``)."""
        window = None if self.profile is None else self.profile.context_window
        return window or context_window_for(self._model_id)

    def __repr__(self) -> str:
        return f"AnthropicModel({self._model_id!r})"

    # -- the ChatModel protocol ------------------------------------------------

    async def generate(self, request: ModelRequest) -> AssistantMessage:
        """Answer one request with a plain (non-streaming) API call.

        When the SDK would refuse a plain request as possibly longer than its
        10-minute default timeout (more than ~21k ``max_tokens``, less for some
        models, and neither the client nor the call sets a timeout), the call is
        made streaming instead, with the same result.

        Raises:
            RateLimitError, OverloadedError: Worth retrying (see ``retry_after``).
            ModelConnectionError: The API could not be reached; worth retrying.
            ContextWindowExceeded: The conversation does not fit the model.
            ModelAPIError: The API rejected the request; the message says why.
            ConfigurationError: No API key could be found.
        """
        body = self.build_body(request)
        client = await self._client()
        if self._plain_call_refused(client, body["max_tokens"]):
            return await self._generate_streaming(request)
        waited = await self.limiter.acquire()
        try:
            self.limiter.report_wait(request, waited, self._model_id)
            # The raw answer, read as JSON once: the SDK would build its own model
            # of it, only for us to turn it back into a dict.
            raw = await client.messages.with_raw_response.create(
                model=body.pop("model"),
                max_tokens=body.pop("max_tokens"),
                messages=body.pop("messages"),
                stream=False,
                extra_body=body,
                **self._sdk_options,
            )
            response = json.loads(raw.http_response.content)
        except json.JSONDecodeError as exc:
            raise ModelAPIError(f"the Anthropic API answered with invalid JSON: {exc}") from exc
        except ValueError as exc:
            # The SDK's own check, refusing before anything is sent; it also knows
            # models with a lower limit than ours (see _plain_call_refused).
            if not str(exc).startswith("Streaming is required"):
                raise
            response = None
        except anthropic.APIError as exc:
            raise map_error(exc) from exc
        except TRANSPORT_ERRORS as exc:
            raise transport_failure(exc) from exc
        finally:
            self.limiter.release()
        if response is None:
            return await self._generate_streaming(request)
        return _checked(message_from_api(cast("dict[str, Any]", response), self._prices))

    def _plain_call_refused(self, client: anthropic.AsyncAnthropic, max_tokens: int) -> bool:
        """Whether the SDK would refuse a plain (non-streaming) call as too long.

        The SDK only checks when the timeout is its default, on the call and on
        the client alike (a timeout chosen by the user is trusted); it then
        refuses when a response of ``max_tokens`` could outlast 10 minutes.
        """
        if "timeout" in self._sdk_options:
            return False
        return client.timeout == anthropic.DEFAULT_TIMEOUT and max_tokens > _PLAIN_MAX_TOKENS

    async def _generate_streaming(self, request: ModelRequest) -> AssistantMessage:
        # Streaming has no time limit, and gives the same message in the end.
        async with contextlib.aclosing(self.stream(request)) as parts:
            async for part in parts:
                if isinstance(part, AssistantMessage):
                    return part
        raise AssertionError("stream() ended without the message")  # pragma: no cover

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamPart, None]:
        """Answer one request over the API's server-sent events.

        Yields a :class:`StreamDelta` per piece of text, thinking or tool-input
        JSON as it arrives (``index`` is the content block), then the whole
        :class:`AssistantMessage`. The request slot is held until the last delta
        has been consumed; close the iterator (``aclose``) if you stop early.
        It raises the errors :meth:`generate` raises, and:

        Raises:
            ModelConnectionError: The stream broke off.
            OverloadedError: The stream reported an error event.
        """
        client = await self._client()
        body = self.build_body(request)
        acc = StreamAccumulator(self._prices)
        waited = await self.limiter.acquire()
        try:
            self.limiter.report_wait(request, waited, self._model_id)
            events = await client.messages.create(
                model=body.pop("model"),
                max_tokens=body.pop("max_tokens"),
                messages=body.pop("messages"),
                stream=True,
                extra_body=body,
                **self._sdk_options,
            )
            async with events:
                async for event in events:
                    delta = acc.feed(event)
                    if delta is not None:
                        yield delta
        except anthropic.APIError as exc:
            raise map_error(exc) from exc
        except TRANSPORT_ERRORS as exc:
            # A stream cut off midway (reset, read timeout, truncated chunk) is as
            # passing a failure as a refused connection, and as worth retrying.
            raise transport_failure(exc) from exc
        finally:
            self.limiter.release()
        yield _checked(acc.result())

    # -- building requests -----------------------------------------------------

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body this model sends for ``request`` (see the module docstring).

        Public so that tests and debugging can see exactly what would be sent.
        """
        settings = request.settings
        body: dict[str, Any] = {"model": self._model_id, "max_tokens": self.max_tokens}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        # Copies: cache breakpoints are marked in place, and the caller's own
        # option objects must neither change nor carry marks into the next call.
        body.update(copy.deepcopy(self.request_options))
        body.update({k: v for k, v in settings.items() if k in SETTINGS_KEYS and v is not None})
        body.update(copy.deepcopy(settings.get("anthropic_options") or {}))
        # The system prompt and the system options are the stable part, cached up
        # to a breakpoint; system messages of the conversation (the agent's
        # memory) change between calls and follow the breakpoint (see below).
        system = system_to_api(request.system_prompt, ())
        system += system_option_to_api(body.pop("system", None))
        if system:
            body["system"] = system
        tools = tools_to_api(request.tools) + list(body.pop("tools", None) or ())
        if tools:
            body["tools"] = tools
        body["messages"] = messages_to_api(request.messages)
        schema = settings.get(STRUCTURED_OUTPUT)
        if schema is not None:
            body["output_config"] = {
                **(body.get("output_config") or {}),
                "format": output_format_to_api(schema),
            }
        cache: CacheSettings | None = settings.get(CACHE_SETTING)
        if cache is not None:  # {} asks for the defaults
            apply_cache_breakpoints(body, cache, already_used=_count_breakpoints(body))
        late = system_to_api(None, request.messages)
        if late:
            body.setdefault("system", []).extend(late)
        return body

    # -- the client ------------------------------------------------------------

    async def _client(self) -> anthropic.AsyncAnthropic:
        if self._user_client is not None:
            return self._user_client
        return await self._own_clients.get()

    async def _make_client(self) -> anthropic.AsyncAnthropic:
        # Building the client reads credential files and loads CA certificates:
        # blocking work, so it happens in a thread.
        return await anyio.to_thread.run_sync(self._new_client)

    def _new_client(self) -> anthropic.AsyncAnthropic:
        try:
            client = anthropic.AsyncAnthropic(**self._client_args)
        except anthropic.CredentialsError as exc:
            raise ConfigurationError(f"Anthropic credentials could not be loaded: {exc}") from exc
        if client.api_key is None and client.auth_token is None and client.credentials is None:
            raise ConfigurationError(
                "no Anthropic API key: set ANTHROPIC_API_KEY or pass "
                "AnthropicModel(api_key=...); `deepactors demo` runs without one"
            )
        return client

    async def aclose(self) -> None:
        """Close the HTTP client this model made for the current event loop, if any.

        Not needed for cleanliness: the client is also closed when the event-loop
        run that made it ends. A later call makes a new one.
        """
        await self._own_clients.aclose()


def _checked(message: AssistantMessage) -> AssistantMessage:
    """``message``, unless its stop reason says it is an error (see the module docstring)."""
    if message.stop_reason == "model_context_window_exceeded":
        raise ContextWindowExceeded(
            "the conversation filled the model's context window while it was answering "
            "(stop_reason model_context_window_exceeded)"
        )
    return message


async def _close_client(client: anthropic.AsyncAnthropic) -> None:
    await client.close()


def _count_breakpoints(body: Mapping[str, Any]) -> int:
    """Breakpoints already present (from ``anthropic_options`` or a top-level field)."""
    count = 1 if body.get("cache_control") else 0
    for key in ("tools", "system"):
        count += sum(1 for block in body.get(key) or () if "cache_control" in block)
    return count
