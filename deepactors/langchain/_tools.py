"""LangChain tools (``BaseTool``, ``StructuredTool``, ``@tool``) as deepactors tools.

The model sees what LangChain would send it: the tool's name, description and
``tool_call_schema`` (its arguments without the injected ones). The tool is run
through LangChain's own ``invoke``/``ainvoke`` with a tool call, so its input
validation, ``handle_tool_error``, ``response_format="content_and_artifact"``
and callbacks behave as under LangGraph's ``ToolNode``; the result is turned
back into what deepactors' runtime expects: text or content blocks, an error
result (``ToolException``, a ``ToolMessage`` with ``status="error"``), or
LangGraph's ``Command(update=...)`` as deepactors' ``Command``. ``return_direct``
and ``Command(goto=...)`` are refused: a deepactors tool cannot end the run.

Injected parameters are filled the way ``ToolNode`` fills them:

* ``InjectedToolCallId``: the call's id (LangChain does it, given a tool call);
* ``InjectedState`` / ``InjectedState("field")``: the agent's state in LangChain's
  shapes (messages as ``langchain_core`` messages, files as ``FileData`` dicts);
* ``InjectedStore``: the agent's store;
* ``ToolRuntime`` (LangGraph's): ``state``, ``context``, ``config``,
  ``stream_writer``, ``tool_call_id`` and ``store``;
* any other ``InjectedToolArg``: the value of the same name in the run's
  ``context=``, when there is one (LangGraph leaves these to the caller).

Where a tool runs: a sync tool in a worker thread, as deepactors' own sync
tools (see :mod:`deepactors.tools`), on both loops. An async tool through
LangChain's ``ainvoke`` on asyncio; on trio, whose loop LangChain's async
machinery cannot use, its coroutine is awaited directly (no callbacks then).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any, cast, get_args, get_origin, get_type_hints

import jsonschema
import sniffio
from langchain_core.messages import ToolMessage as LCToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langchain_core.tools.base import _is_injected_arg_type, get_all_basemodel_annotations
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from .._core.threads import run_sync_in_thread
from ..context import ToolRuntime
from ..errors import ConfigurationError, ToolArgumentsError, ToolError
from ..messages import ContentBlock, ImageBlock, TextBlock, to_message
from ..tools import _NAME_RE, Command, Tool, _describe_validation
from ._messages import to_langchain
from .views import values_to_lc

__all__ = ["LangChainTool", "from_langchain_tool", "from_langgraph_command"]

# The Tool's runtime parameter: a name no model-visible argument can have.
_RUNTIME = "__deepactors_runtime__"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Injections:
    """Where each injected parameter of one tool comes from; built once per tool."""

    state: Mapping[str, str | None]  # parameter -> state key (None: the whole state)
    store: str | None = None
    runtime: str | None = None
    runtime_cls: type | None = None
    from_context: tuple[str, ...] = ()


@dataclasses.dataclass(slots=True, kw_only=True, eq=False)
class LangChainTool(Tool):
    """A LangChain tool made a :class:`~deepactors.tools.Tool`.

    Validation checks the model's arguments against the tool's call schema (so
    the model gets deepactors' readable error) but hands the tool the arguments
    as the model gave them: LangChain validates and converts them itself.

    Attributes:
        lc_tool: The LangChain tool.
    """

    lc_tool: BaseTool | None = None
    json_schema: dict[str, object] | None = None

    def validate(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Check the model's arguments; return them unchanged (LangChain converts them).

        Raises:
            ToolArgumentsError: With a message the model can act on.
        """
        if self.json_schema is not None:
            try:
                jsonschema.validate(dict(args), self.json_schema)
            except jsonschema.ValidationError as exc:
                raise ToolArgumentsError(f"invalid arguments: {exc.message}") from None
            return dict(args)
        try:
            self.args_model.model_validate(args)
        except ValidationError as exc:
            raise ToolArgumentsError(_describe_validation(exc)) from None
        return dict(args)


def from_langchain_tool(lc_tool: BaseTool) -> LangChainTool:
    """A deepactors tool that runs ``lc_tool``.

    Raises:
        ConfigurationError: The tool cannot be described to a model (naming the
            tool and, where known, the parameter), or its name is not one a
            model accepts.
    """
    name = lc_tool.name
    if not _NAME_RE.match(name):
        raise ConfigurationError(
            f"LangChain tool name {name!r} must be 1-64 letters, digits, '_' or '-'"
        )
    if lc_tool.return_direct:
        # Ending the run on a tool's result is not something a deepactors tool can
        # ask for yet; running on past it would change what the script does.
        raise ConfigurationError(
            f"LangChain tool {name!r} has return_direct=True, which deepactors does not "
            "support: drop it (the model then answers from the tool's result)"
        )
    try:
        function = convert_to_openai_tool(lc_tool)["function"]
    except Exception as exc:
        raise ConfigurationError(
            f"LangChain tool {name!r} cannot be described to a model: {exc}"
        ) from exc
    parameters = dict(function.get("parameters") or {"type": "object", "properties": {}})
    parameters.setdefault("properties", {})
    call_schema = lc_tool.tool_call_schema
    json_schema: dict[str, object] | None = None
    if isinstance(call_schema, type) and issubclass(call_schema, BaseModel):
        args_model: type[BaseModel] = call_schema
    else:
        json_schema = parameters
        args_model = create_model(f"{name}_args", __config__=ConfigDict(extra="allow"))
    injections = _injections(lc_tool)
    fn = functools.partial(_run, lc_tool, injections)
    return LangChainTool(
        name=name,
        description=lc_tool.description or function.get("description") or name,
        parameters=parameters,
        fn=fn,
        args_model=args_model,
        runtime_param=_RUNTIME,
        is_async=True,
        _fields=tuple(parameters["properties"]),
        lc_tool=lc_tool,
        json_schema=json_schema,
    )


def _injections(lc_tool: BaseTool) -> _Injections:
    """Read which parameters of ``lc_tool`` are injected, and from where (as ToolNode does)."""
    annotations: dict[str, Any] = {}
    func = getattr(lc_tool, "func", None) or getattr(lc_tool, "coroutine", None)
    if func is not None:
        try:
            annotations.update(get_type_hints(func, include_extras=True))
        except Exception as exc:
            raise ConfigurationError(
                f"cannot read the type hints of LangChain tool {lc_tool.name!r}: {exc}"
            ) from exc
    # A schema given as a JSON schema dict has no annotations to read.
    with contextlib.suppress(Exception):
        annotations.update(get_all_basemodel_annotations(lc_tool.get_input_schema()))
    state: dict[str, str | None] = {}
    store = runtime = None
    runtime_cls = None
    from_context: list[str] = []
    for pname, annotation in annotations.items():
        if pname == "return" or not _is_injected_arg_type(annotation):
            continue
        marker = _marker(annotation)
        kinds = {cls.__name__ for cls in _mro(marker)}
        if "ToolRuntime" in kinds:
            runtime = pname
            runtime_cls = marker if isinstance(marker, type) else get_origin(marker)
        elif "InjectedState" in kinds:
            state[pname] = getattr(marker, "field", None) if not isinstance(marker, type) else None
        elif "InjectedStore" in kinds:
            store = pname
        elif "InjectedToolCallId" not in kinds:
            from_context.append(pname)
    return _Injections(
        state=state,
        store=store,
        runtime=runtime,
        runtime_cls=runtime_cls,
        from_context=tuple(from_context),
    )


def _marker(annotation: object) -> object:
    """The injection marker of an annotation: ``Annotated``'s metadata, or the type itself."""
    for arg in get_args(annotation)[1:]:
        if any(c.__name__ in _MARKERS for c in _mro(arg)):
            return arg
    return annotation


_MARKERS = frozenset(
    {"InjectedToolArg", "InjectedState", "InjectedStore", "InjectedToolCallId", "ToolRuntime"}
)


def _mro(marker: object) -> tuple[type, ...]:
    cls = marker if isinstance(marker, type) else get_origin(marker) or type(marker)
    return cls.__mro__ if isinstance(cls, type) else ()


async def _run(lc_tool: BaseTool, injections: _Injections, **kwargs: object) -> object:
    """Run ``lc_tool`` for one call; return what deepactors' runtime takes as a result."""
    runtime = kwargs.pop(_RUNTIME)
    assert isinstance(runtime, ToolRuntime)  # the Tool passes its runtime under _RUNTIME
    config = _config(runtime)
    args = {**kwargs, **_injected(lc_tool, injections, runtime, config)}
    call = {"type": "tool_call", "name": lc_tool.name, "args": args, "id": runtime.tool_call_id}
    on_asyncio = sniffio.current_async_library() == "asyncio"
    try:
        if _has_sync(lc_tool) and not (on_asyncio and _has_async(lc_tool)):
            # Sync tools run as deepactors' own do: in a worker thread, never on the loop.
            out: object = await run_sync_in_thread(
                functools.partial(lc_tool.invoke, call, config), name=lc_tool.name
            )
        elif on_asyncio:
            out = await lc_tool.ainvoke(call, config)
        else:
            out = await _await_on_trio(lc_tool, args, runtime.tool_call_id, config)
    except ToolException as exc:
        # Not handled by the tool's handle_tool_error: the model reads the message.
        raise ToolError(str(exc)) from exc
    return _result(lc_tool, out)


def _has_sync(lc_tool: BaseTool) -> bool:
    if isinstance(lc_tool, StructuredTool):
        return lc_tool.func is not None
    return True  # _run is abstract on BaseTool: every other tool has one


def _has_async(lc_tool: BaseTool) -> bool:
    if isinstance(lc_tool, StructuredTool):
        return lc_tool.coroutine is not None
    return type(lc_tool)._arun is not BaseTool._arun


async def _await_on_trio(
    lc_tool: BaseTool, args: dict[str, object], call_id: str, config: RunnableConfig
) -> object:
    """An async-only tool on trio: LangChain's ``ainvoke`` needs asyncio, so the
    coroutine is awaited here, with LangChain's own input parsing and error handling."""
    coroutine = getattr(lc_tool, "coroutine", None)
    if coroutine is None:
        raise ToolError(
            f"LangChain tool {lc_tool.name!r} is async-only, and LangChain runs async tools "
            "only on asyncio: give it a sync _run too, or run the agent on asyncio"
        )
    try:
        kwargs = lc_tool._parse_input(args, call_id)
        if not isinstance(kwargs, dict):
            kwargs = {"input": kwargs}
        if "config" in _params(coroutine):
            kwargs["config"] = config
        out = await coroutine(**kwargs)
    except (ToolException, ValidationError) as exc:
        handled = _handled(lc_tool, exc)
        if handled is None:
            raise
        return LCToolMessage(
            content=handled, name=lc_tool.name, tool_call_id=call_id, status="error"
        )
    if lc_tool.response_format == "content_and_artifact" and isinstance(out, tuple):
        out = out[0]
    return out


@functools.cache
def _params(fn: Callable[..., object]) -> frozenset[str]:
    return frozenset(inspect.signature(fn).parameters)


def _handled(lc_tool: BaseTool, exc: Exception) -> str | None:
    """What ``handle_tool_error`` / ``handle_validation_error`` make of ``exc`` (None: raise)."""
    plain: bool | str | None
    if isinstance(exc, ToolException):
        tool_handler = lc_tool.handle_tool_error
        if callable(tool_handler):
            return str(tool_handler(exc))
        plain = tool_handler
    else:
        validation_handler = lc_tool.handle_validation_error
        if callable(validation_handler):
            # LangChain calls this handler with its ValidationError; we pass what the tool raised.
            return str(cast("Callable[[Exception], object]", validation_handler)(exc))
        plain = validation_handler
    if not plain:
        return None
    if isinstance(plain, bool):
        return str(exc.args[0]) if exc.args else "Tool execution error"
    return plain


def _config(runtime: ToolRuntime) -> RunnableConfig:
    run = runtime.run
    configurable: dict[str, object] = {}
    if run.thread_id is not None:
        configurable["thread_id"] = run.thread_id
    return {
        "configurable": configurable,
        "metadata": {"lc_agent_name": run.agent_name, "path": run.path},
    }


def _injected(
    lc_tool: BaseTool, injections: _Injections, runtime: ToolRuntime, config: RunnableConfig
) -> dict[str, object]:
    out: dict[str, object] = {}
    state: dict[str, object] | None = None
    if injections.state or injections.runtime:
        # LangChain's shapes: files as FileData dicts, messages as message objects.
        state = values_to_lc(runtime.state)
        state["messages"] = [to_langchain(m) for m in runtime.state.messages]
    for pname, key in injections.state.items():
        assert state is not None
        if key is None:
            out[pname] = state
        elif key in state:
            out[pname] = state[key]
    if injections.store is not None:
        out[injections.store] = runtime.store
    if injections.runtime is not None:
        out[injections.runtime] = _lg_runtime(injections, runtime, state or {}, config)
    context = runtime.context
    for pname in injections.from_context:
        if isinstance(context, Mapping) and pname in context:
            out[pname] = context[pname]
        elif hasattr(context, pname):
            out[pname] = getattr(context, pname)
    return out


def _lg_runtime(
    injections: _Injections,
    runtime: ToolRuntime,
    state: dict[str, object],
    config: RunnableConfig,
) -> object:
    """LangGraph's ``ToolRuntime`` for a tool that asks for one."""
    cls = injections.runtime_cls
    values: dict[str, object] = {
        "state": state,
        # LangGraph's runtime has context None when the run was given none.
        "context": None if _no_context(runtime.context) else runtime.context,
        "config": config,
        "stream_writer": runtime.write,
        "tool_call_id": runtime.tool_call_id,
        "store": runtime.store,
        "tools": [],
    }
    if cls is None or not dataclasses.is_dataclass(cls):
        return runtime
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def _no_context(context: object) -> bool:
    return context is None or (isinstance(context, Mapping) and not context)


def _result(lc_tool: BaseTool, out: object) -> object:
    """LangChain's tool output as deepactors' result: content, a Command, or a ToolError."""
    if _is_lg_command(out):
        return _command(lc_tool, out)
    if isinstance(out, LCToolMessage):
        if out.status == "error":
            raise ToolError(_text(out.content))
        return _content(out.content)
    return out


def _is_lg_command(value: object) -> bool:
    cls = type(value)
    return cls.__name__ == "Command" and cls.__module__.startswith("langgraph")


def _command(lc_tool: BaseTool, command: Any) -> Command:
    return from_langgraph_command(command, tool_name=lc_tool.name)


def from_langgraph_command(command: Any, *, tool_name: str) -> Command:
    """LangGraph's ``Command(update=...)`` returned by a tool, as deepactors' own.

    Raises:
        ToolError: ``goto`` or ``graph`` (a tool here can only update state).
    """
    if getattr(command, "goto", None) or getattr(command, "graph", None) is not None:
        raise ToolError(
            f"tool {tool_name!r} returned Command(goto=/graph=): deepactors tools can "
            "only update state (Command(update=...))"
        )
    update = command.update
    if update is None:
        return Command(update={})
    if not isinstance(update, Mapping):
        update = dict(update)
    update = dict(update)
    if "messages" in update:
        update["messages"] = [to_message(m) for m in update["messages"]]
    return Command(update=update)


def _content(content: object) -> str | list[ContentBlock]:
    if isinstance(content, str):
        return content
    blocks: list[ContentBlock] = []
    for part in content if isinstance(content, list) else [content]:
        block = _block(part)
        if block is not None:
            blocks.append(block)
    return blocks


def _block(part: object) -> ContentBlock | None:
    if isinstance(part, str):
        return TextBlock(text=part)
    if not isinstance(part, Mapping):
        return TextBlock(text=json.dumps(part, default=str))
    kind = part.get("type")
    if kind == "text":
        return TextBlock(text=str(part.get("text", "")))
    if kind == "image_url":
        url = part["image_url"]["url"] if isinstance(part.get("image_url"), Mapping) else ""
        return ImageBlock(source={"type": "url", "url": str(url or part.get("image_url"))})
    if kind == "image":
        if part.get("source_type") == "base64" or "base64" in part:
            data = part.get("data") or part.get("base64")
            mime = part.get("mime_type") or "image/png"
            return ImageBlock(source={"type": "base64", "media_type": mime, "data": str(data)})
        if "source" in part:
            return ImageBlock(source=dict(part["source"]))
        if "url" in part:
            return ImageBlock(source={"type": "url", "url": str(part["url"])})
    return TextBlock(text=json.dumps(part, default=str))


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.text for b in _content(content) if isinstance(b, TextBlock))
