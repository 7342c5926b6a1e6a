"""OpenAI, and every OpenAI-compatible server, over the official ``openai`` SDK.

:class:`OpenAIModel` implements :class:`~deepactors.models.ChatModel` over
``openai.AsyncOpenAI``, whose HTTP stack is built on anyio: it runs on asyncio
and trio alike. Install it with ``pip install 'deepactors[openai]'``.

Two APIs
    ``api="chat"`` (the default) speaks Chat Completions, which every
    OpenAI-compatible server speaks too (vLLM, Ollama, LM Studio, llama.cpp's
    server, OpenRouter, LiteLLM's proxy, Together). ``api="responses"`` speaks the
    Responses API: reasoning items come back as thinking blocks that carry the
    item and are sent back on the next turn with their encrypted content, so
    a reasoning model keeps its reasoning across the turns of a tool loop
    without anything stored on OpenAI's side (``store`` is false unless you say
    otherwise). The model strings ``"openai:<id>"`` and
    ``"openai-responses:<id>"`` choose one or the other.

Other servers
    ``base_url=`` (or ``OPENAI_BASE_URL``) points the model at any server that
    speaks the API. What such servers leave out is tolerated: no ``usage`` (the
    message's usage is then None, and a budget charges the call's whole
    reservation), no tool-call ids (one is made up), tool-call arguments in any
    number of pieces, with or without an index, no ``finish_reason``. The
    ``ollama:``, ``vllm:``, ``openrouter:``, ``lmstudio:``, ``litellm:`` and
    ``together:`` strings are presets of this class (:mod:`deepactors.models`).

How a request is built, lowest precedence first:
    1. The model's options: ``max_tokens``, ``temperature``, ``reasoning_effort``,
       ``parallel_tool_calls``.
    2. ``**request_options``: any body field of the chosen API, sent verbatim
       (``seed=``, ``service_tier=``, ``store=``, ...), plus the SDK options
       ``extra_headers`` and ``timeout``.
    3. ``ModelRequest.settings``: ``max_tokens``, ``temperature``, ``top_p``,
       ``stop_sequences`` (sent as ``stop``, Chat Completions only),
       ``reasoning_effort``, ``tool_choice``, ``parallel_tool_calls``, ``seed``,
       ``service_tier``; ``"openai_options"``: a mapping of further body fields
       sent verbatim; and ``STRUCTURED_OUTPUT`` (a JSON schema) which becomes
       ``response_format`` (Chat Completions) or ``text.format`` (Responses),
       of type ``json_schema``, made strict where the schema allows.

Stop reasons are given in the vocabulary the rest of deepactors reads:
``end_turn``, ``tool_use``, ``max_tokens`` and ``refusal``.

Errors, concurrency and clients are as for
:class:`~deepactors.models.anthropic.AnthropicModel`: 429 ->
:class:`~deepactors.errors.RateLimitError` with ``retry_after`` (except
``insufficient_quota``, which waiting does not cure); 5xx ->
:class:`~deepactors.errors.OverloadedError`; a prompt that does not fit ->
:class:`~deepactors.errors.ContextWindowExceeded` (what summarization recovers
from); a connection refused, reset or timed out ->
:class:`~deepactors.errors.ModelConnectionError`. The SDK's own retries are off.
Every request holds a slot of the model's :class:`RequestLimiter`.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Final, Literal, final

try:
    import openai
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("OpenAIModel needs the openai SDK: pip install 'deepactors[openai]'") from exc
import anyio
import anyio.to_thread
from anyio.abc import AsyncResource

from deepactors._core.perloop import PerLoop
from deepactors.errors import ConfigurationError
from deepactors.messages import AssistantMessage

from ._base import STRUCTURED_OUTPUT, ModelRequest, StreamPart
from ._http_errors import TRANSPORT_ERRORS, transport_failure
from ._limiter import RequestLimiter
from ._openai_chat import (
    ChatAccumulator,
    chunks_of,
    message_from_chat,
    messages_to_chat,
    tools_to_chat,
)
from ._openai_common import json_view, strict_schema
from ._openai_errors import map_error
from ._openai_responses import (
    ResponsesAccumulator,
    input_to_responses,
    message_from_response,
    tools_to_responses,
)
from .profiles import ModelProfile, profile_for

__all__ = ["DEFAULT_MAX_CONCURRENT_REQUESTS", "DEFAULT_MAX_TOKENS", "DEFAULT_MODEL", "OpenAIModel"]

DEFAULT_MODEL: Final = "gpt-5.5"
"""The model id of ``"openai:"`` strings that name none."""

DEFAULT_MAX_TOKENS: Final = 32_768
"""Output limit per call for a model whose profile is known (or its own limit if
lower): room for a reasoning model's reasoning and its answer."""

DEFAULT_MAX_CONCURRENT_REQUESTS: Final = 16

Api = Literal["chat", "responses"]

_SETTINGS: Final = frozenset(
    {"temperature", "top_p", "tool_choice", "parallel_tool_calls", "seed", "service_tier"}
)
_SDK_OPTIONS: Final = ("extra_headers", "timeout")


@final
class OpenAIModel(AsyncResource):
    """A model behind the OpenAI API or any server that speaks it.

    Args:
        model_id: The model (``"gpt-5.5"``, ``"llama3.3"`` on Ollama, ...).
        api: ``"chat"`` (Chat Completions) or ``"responses"``.
        max_tokens: Output limit per call unless a request's settings say
            otherwise. Default: the profile's output limit, at most
            :data:`DEFAULT_MAX_TOKENS`; for a model without a profile, none is
            sent (the server decides) and a budget reserves its default.
        max_tokens_param: The Chat Completions field that carries it:
            ``max_completion_tokens`` (OpenAI's) or ``max_tokens`` (what older
            compatible servers read).
        temperature: Sampling temperature; None leaves the server's default.
        reasoning_effort: ``"none"``, ``"low"``, ``"medium"``, ``"high"``, ...;
            None leaves the model's default.
        reasoning_summary: Responses API: ask for reasoning summaries
            (``"auto"``, ``"concise"``, ``"detailed"``), streamed as thinking.
        parallel_tool_calls: Sent when not None.
        client: A ready ``openai.AsyncOpenAI`` (then ``api_key``, ``base_url``,
            ``timeout`` and ``max_retries`` are ignored; closing it is yours).
        api_key: Default: ``OPENAI_API_KEY``.
        base_url: Another server; default: ``OPENAI_BASE_URL`` or OpenAI's.
        timeout: Seconds per HTTP request; default: the SDK's.
        max_retries: Retries inside the SDK; 0: retrying is
            :class:`~deepactors.middleware.ModelRetryMiddleware`'s.
        default_headers: Headers sent with every request (OpenRouter's
            ``HTTP-Referer``, a proxy's key).
        limiter: A :class:`RequestLimiter` to share with other models.
        max_concurrent_requests: The size of this model's own limiter.
        native_structured_output: Whether ``response_format`` may use the API's
            json_schema output; default: by the profile (False when unknown).
        stream_usage: Ask for usage at the end of a stream
            (``stream_options.include_usage``); some servers refuse the option.
        profile: The model's :class:`~deepactors.models.profiles.ModelProfile`;
            default: looked up by ``model_id``.
        provider: Who serves it, for error messages (``"Ollama"``).
        **request_options: Further body fields sent with every request.

    The client is made lazily, once per event loop (see ``AnthropicModel``);
    close it with :meth:`aclose` or ``async with model:``.
    """

    def __init__(
        self,
        model_id: str = DEFAULT_MODEL,
        *,
        api: Api = "chat",
        max_tokens: int | None = None,
        max_tokens_param: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens",
        temperature: float | None = None,
        reasoning_effort: str | None = None,
        reasoning_summary: str | None = None,
        parallel_tool_calls: bool | None = None,
        client: openai.AsyncOpenAI | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        max_retries: int = 0,
        default_headers: Mapping[str, str] | None = None,
        limiter: RequestLimiter | None = None,
        max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS,
        native_structured_output: bool | None = None,
        stream_usage: bool = True,
        profile: ModelProfile | None = None,
        provider: str = "OpenAI",
        **request_options: Any,
    ) -> None:
        if not model_id:
            raise ConfigurationError("model_id must not be empty")
        if api not in ("chat", "responses"):
            raise ConfigurationError(f"api must be 'chat' or 'responses', not {api!r}")
        self._model_id = model_id
        self.api: Api = api
        self.profile = profile if profile is not None else profile_for(model_id)
        if max_tokens is None and self.profile is not None:
            limit = self.profile.max_output_tokens
            max_tokens = min(limit, DEFAULT_MAX_TOKENS) if limit else DEFAULT_MAX_TOKENS
        if max_tokens is not None and max_tokens < 1:
            raise ConfigurationError(f"max_tokens must be >= 1, not {max_tokens}")
        self.max_tokens = max_tokens
        self.max_tokens_param = max_tokens_param
        self.temperature = temperature
        self.reasoning_effort = reasoning_effort
        self.reasoning_summary = reasoning_summary
        self.parallel_tool_calls = parallel_tool_calls
        self.stream_usage = stream_usage
        self.provider = provider
        if native_structured_output is None:
            native_structured_output = self.profile is not None and self.profile.structured_output
        self.native_structured_output = native_structured_output
        self._user_client = client
        self._client_args: dict[str, Any] = {"max_retries": max_retries}
        for key, value in (
            ("api_key", api_key),
            ("base_url", base_url),
            ("timeout", timeout),
            ("default_headers", default_headers),
        ):
            if value is not None:
                self._client_args[key] = value
        self._own_clients: PerLoop[openai.AsyncOpenAI] = PerLoop(self._make_client, _close)
        self.limiter = limiter if limiter is not None else RequestLimiter(max_concurrent_requests)
        self._sdk_options = {
            k: request_options.pop(k) for k in _SDK_OPTIONS if k in request_options
        }
        self.request_options: dict[str, Any] = request_options
        # Reasoning items are sent back whole only with their encrypted content,
        # which models without reasoning refuse to produce.
        self._encrypted_reasoning = bool(
            reasoning_effort not in (None, "none")
            or (self.profile is not None and self.profile.reasoning)
        )

    @property
    def model_name(self) -> str:
        """The model id, as sent to the server."""
        return self._model_id

    @property
    def context_window(self) -> int | None:
        """The profile's context window, or None when unknown."""
        return None if self.profile is None else self.profile.context_window

    def __repr__(self) -> str:
        return f"OpenAIModel({self._model_id!r}, api={self.api!r})"

    # -- the ChatModel protocol ------------------------------------------------

    async def generate(self, request: ModelRequest) -> AssistantMessage:
        """Answer one request with a plain (non-streaming) call.

        Raises:
            RateLimitError, OverloadedError: Worth retrying (see ``retry_after``).
            ModelConnectionError: The server could not be reached; worth retrying.
            ContextWindowExceeded: The conversation does not fit the model.
            ModelAPIError: The server rejected the request; the message says why.
            ConfigurationError: No API key could be found.
        """
        body = self.build_body(request)
        client = await self._client()
        waited = await self.limiter.acquire()
        try:
            self.limiter.report_wait(request, waited, self._model_id)
            # The raw answer, read as JSON once and read by attribute through a
            # thin view: the SDK would build a model of every part of it first.
            if self.api == "chat":
                raw = await client.chat.completions.with_raw_response.create(
                    model=body.pop("model"),
                    messages=body.pop("messages"),
                    stream=False,
                    extra_body=body,
                    **self._sdk_options,
                )
            else:
                raw = await client.responses.with_raw_response.create(
                    model=body.pop("model"),
                    input=body.pop("input"),
                    stream=False,
                    extra_body=body,
                    **self._sdk_options,
                )
            answer = json_view(raw.http_response.content)
        except openai.APIError as exc:
            raise map_error(exc, self.provider) from exc
        except TRANSPORT_ERRORS as exc:
            raise transport_failure(exc, self.provider) from exc
        finally:
            self.limiter.release()
        if self.api == "chat":
            return message_from_chat(answer, self.profile)
        return message_from_response(answer, self.profile)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamPart, None]:
        """Answer one request over server-sent events: deltas, then the whole message.

        ``index`` of a tool-input delta is the call's position plus one (Chat
        Completions) or its output item (Responses). The request slot is held
        until the last delta has been consumed; close the iterator if you stop early.
        It raises the errors :meth:`generate` raises, and:

        Raises:
            deepactors.errors.ModelConnectionError: The stream broke off.
        """
        client = await self._client()
        body = self.build_body(request, stream=True)
        acc: ChatAccumulator | ResponsesAccumulator
        waited = await self.limiter.acquire()
        try:
            self.limiter.report_wait(request, waited, self._model_id)
            if self.api == "chat":
                acc = ChatAccumulator(self.profile)
                chunks = await client.chat.completions.create(
                    model=body.pop("model"),
                    messages=body.pop("messages"),
                    stream=True,
                    extra_body=body,
                    **self._sdk_options,
                )
                async with chunks, contextlib.aclosing(chunks_of(chunks, self.provider)) as it:
                    async for chunk in it:
                        for delta in acc.feed(chunk):
                            yield delta
            else:
                acc = ResponsesAccumulator(self.profile)
                events = await client.responses.create(
                    model=body.pop("model"),
                    input=body.pop("input"),
                    stream=True,
                    extra_body=body,
                    **self._sdk_options,
                )
                async with events:
                    async for event in events:
                        part = acc.feed(event)
                        if part is not None:
                            yield part
        except openai.APIError as exc:
            raise map_error(exc, self.provider) from exc
        except TRANSPORT_ERRORS as exc:
            raise transport_failure(exc, self.provider) from exc
        finally:
            self.limiter.release()
        yield acc.result()

    # -- building requests -----------------------------------------------------

    def build_body(self, request: ModelRequest, *, stream: bool = False) -> dict[str, Any]:
        """The JSON body this model sends for ``request`` (without ``stream``).

        Public so that tests and debugging can see exactly what would be sent.
        """
        settings = request.settings
        body: dict[str, Any] = {"model": self._model_id}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.parallel_tool_calls is not None and request.tools:
            body["parallel_tool_calls"] = self.parallel_tool_calls
        if self.request_options:
            body.update(copy.deepcopy(self.request_options))
        if settings:
            body.update({k: v for k, v in settings.items() if k in _SETTINGS and v is not None})
        max_tokens = settings.get("max_tokens") if settings else None
        if max_tokens is None:
            max_tokens = self.max_tokens
        effort = (settings.get("reasoning_effort") if settings else None) or self.reasoning_effort
        schema = settings.get(STRUCTURED_OUTPUT) if settings else None
        if self.api == "chat":
            self._chat_body(body, request, max_tokens, effort, schema, stream)
        else:
            self._responses_body(body, request, max_tokens, effort, schema)
        if settings and (extra := settings.get("openai_options")):
            body.update(copy.deepcopy(extra))
        return body

    def _chat_body(
        self,
        body: dict[str, Any],
        request: ModelRequest,
        max_tokens: int | None,
        effort: str | None,
        schema: Mapping[str, object] | None,
        stream: bool,
    ) -> None:
        body["messages"] = messages_to_chat(request.system_prompt, request.messages)
        if request.tools:
            body["tools"] = tools_to_chat(request.tools)
        else:
            body.pop("parallel_tool_calls", None)
        if max_tokens is not None:
            body[self.max_tokens_param] = max_tokens
        if effort is not None:
            body["reasoning_effort"] = effort
        stop = request.settings.get("stop_sequences") if request.settings else None
        if stop:
            body["stop"] = list(stop)
        if schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", **strict_schema(schema)},
            }
        if stream and self.stream_usage:
            body["stream_options"] = {"include_usage": True}

    def _responses_body(
        self,
        body: dict[str, Any],
        request: ModelRequest,
        max_tokens: int | None,
        effort: str | None,
        schema: Mapping[str, object] | None,
    ) -> None:
        body["input"] = input_to_responses(request.messages)
        if request.system_prompt:
            body["instructions"] = request.system_prompt
        if request.tools:
            body["tools"] = tools_to_responses(request.tools)
        else:
            body.pop("parallel_tool_calls", None)
        if max_tokens is not None:
            body["max_output_tokens"] = max_tokens
        if effort is not None or self.reasoning_summary is not None:
            reasoning = dict(body.get("reasoning") or {})
            if effort is not None:
                reasoning["effort"] = effort
            if self.reasoning_summary is not None:
                reasoning["summary"] = self.reasoning_summary
            body["reasoning"] = reasoning
        body.setdefault("store", False)
        if self._encrypted_reasoning and body["store"] is False:
            include = list(body.get("include") or ())
            if "reasoning.encrypted_content" not in include:
                include.append("reasoning.encrypted_content")
            body["include"] = include
        if schema is not None:
            text = dict(body.get("text") or {})
            text["format"] = {"type": "json_schema", "name": "response", **strict_schema(schema)}
            body["text"] = text

    # -- the client ------------------------------------------------------------

    async def _client(self) -> openai.AsyncOpenAI:
        if self._user_client is not None:
            return self._user_client
        return await self._own_clients.get()

    async def _make_client(self) -> openai.AsyncOpenAI:
        # Building the client loads CA certificates: blocking work, in a thread.
        return await anyio.to_thread.run_sync(self._new_client)

    def _new_client(self) -> openai.AsyncOpenAI:
        args = self._client_args
        if "api_key" not in args and not os.environ.get("OPENAI_API_KEY"):
            raise ConfigurationError(
                f"no API key for {self.provider}: set OPENAI_API_KEY or pass "
                "OpenAIModel(api_key=...)"
            )
        try:
            return openai.AsyncOpenAI(**args)
        except openai.OpenAIError as exc:
            raise ConfigurationError(
                f"the {self.provider} client could not be made: {exc}"
            ) from exc

    async def aclose(self) -> None:
        """Close the HTTP client this model made for the current event loop, if any."""
        await self._own_clients.aclose()


async def _close(client: openai.AsyncOpenAI) -> None:
    await client.close()
