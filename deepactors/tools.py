"""Tools: plain Python functions the model can call.

Any sync or async function with type hints is a tool. Its JSON schema is built
once, by pydantic, from the signature; the descriptions of its arguments come
from the docstring's ``Args:`` section (Google style). The model's arguments are
validated against the same model before the function runs, and anything that
goes wrong (bad arguments, an exception) becomes an error result the model can
read, never a crash of the run.

A parameter annotated :class:`~deepactors.context.ToolRuntime` is filled in by
the runtime and hidden from the model. Sync functions run in a worker thread, so
a slow one never blocks the event loop.

What a deadline can interrupt: an async tool is cancelled at its next ``await``
(anyio cancellation, as anywhere else). A sync tool cannot be: a thread cannot
be killed. When the run's deadline passes (``ainvoke(timeout=...)``, a
subagent's timeout, the caller's ``move_on_after``, a cancelled run), the run
stops waiting for the thread and ends at the deadline; the thread runs on as a
*stray* thread until the function returns, and what it returns is discarded.
Side effects it makes after the deadline still happen. Each stray thread is
logged (``left a worker thread running``) and logged again if it ever finishes;
while :data:`MAX_STRAY_THREADS` (16) of them are still
running, a sync tool call is refused with an error result instead of starting
another thread. A sync tool that may block for long should take a timeout of
its own, or be written as an async function. An async tool that blocks without
awaiting (``time.sleep`` inside ``async def``) blocks the whole event loop and
no deadline can help: that is a bug in the tool.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast, final, get_type_hints, overload

from pydantic import (
    BaseModel,
    ConfigDict,
    PydanticUserError,
    TypeAdapter,
    ValidationError,
    create_model,
)
from pydantic.fields import FieldInfo

from ._core.threads import (
    MAX_STRAY_THREADS,
    StrayThreadStatistics,
    TooManyStrayThreads,
    run_sync_in_thread,
    stray_thread_statistics,
    wait_for_stray_threads,
)
from .context import ToolRuntime
from .errors import ConfigurationError, ToolArgumentsError, ToolError
from .messages import (
    ContentBlock,
    ImageBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolMessage,
)

__all__ = [
    "MAX_STRAY_THREADS",
    "Command",
    "ProviderTool",
    "StrayThreadStatistics",
    "TooManyStrayThreads",
    "Tool",
    "ToolArgumentsError",
    "as_tool",
    "provider_tool",
    "stray_thread_statistics",
    "tool",
    "tool_result_message",
    "wait_for_stray_threads",
]

_BLOCK_TYPES = (TextBlock, ImageBlock, ThinkingBlock, RedactedThinkingBlock)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """An instruction to the runtime instead of a plain result.

    From a tool: ``Command(update={...})`` writes state channels. If the update's
    ``messages`` holds no :class:`ToolMessage` answering the call, one is added with
    ``result`` as its content.

    As a run's input: ``Command(resume=[...])`` continues an interrupted thread
    with the human's decisions (or past a breakpoint); ``update`` is applied to
    the thread's state first; ``goto="model"`` or ``"tools"`` continues the
    thread at that node (LangGraph's ``Command(goto=...)``).
    """

    update: Mapping[str, Any] | None = None
    result: str = "OK"
    resume: Any = None
    goto: str | None = None


@dataclass(slots=True, kw_only=True, eq=False)
class Tool:
    """A callable the model can use, with its schema.

    Build one with :func:`tool` or :func:`as_tool` rather than directly.

    Attributes:
        name: What the model calls it.
        description: What the model is told it does.
        parameters: JSON schema of the arguments (``{"type": "object", ...}``).
        fn: The function.
        max_concurrency: Calls of it one tool step runs at once (None: all).
            The rest wait in the step's queue, as the calls they are, and
            start in the model's order as running ones finish.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]
    args_model: type[BaseModel]
    runtime_param: str | None = None
    is_async: bool = False
    max_concurrency: int | None = None
    # Names of the model's fields, precomputed so a call does no introspection.
    _fields: tuple[str, ...] = field(default=())

    def validate(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Check the model's arguments; return them converted to Python values.

        Raises:
            ToolArgumentsError: With a message the model can act on.
        """
        try:
            parsed = self.args_model.model_validate(args)
        except ValidationError as exc:
            raise ToolArgumentsError(_describe_validation(exc)) from None
        values = parsed.__dict__
        return {name: values[name] for name in self._fields}

    async def call(self, args: Mapping[str, Any], runtime: ToolRuntime | None = None) -> Any:
        """Validate ``args`` and run the function; return what it returned.

        A sync function runs in a worker thread that a cancellation leaves
        behind (see the module docstring).

        Raises:
            TooManyStrayThreads: A sync tool, while :data:`MAX_STRAY_THREADS`
                stray threads still run.
        """
        kwargs = self.validate(args)
        if self.runtime_param is not None:
            if runtime is None:
                raise ConfigurationError(f"tool {self.name!r} needs a ToolRuntime")
            kwargs[self.runtime_param] = runtime
        if self.is_async:
            out = await self.fn(**kwargs)
        else:
            out = await run_sync_in_thread(functools.partial(self.fn, **kwargs), name=self.name)
        if type(out).__name__ == "Command" and type(out).__module__.startswith("langgraph"):
            # LangGraph's Command(update=...) from a plain function, as from a LangChain
            # tool (deepagents' tools return it): deepactors' own, through the adapter.
            adapter = importlib.import_module(_LANGCHAIN_ADAPTER)
            return adapter.from_langgraph_command(out, tool_name=self.name)
        return out


@final
@dataclass(slots=True, kw_only=True, eq=False)
class ProviderTool(Tool):
    """A tool the model's provider runs on its side, given as the provider's own dict.

    ``tools=[{"type": "web_search_preview"}]`` (OpenAI's Responses API) or
    ``{"type": "web_search_20250305", "name": "web_search"}`` (Anthropic): the
    dict is sent to the model as given, beside the function tools, as LangChain
    does with ``bind_tools``. The provider runs it; its results come back inside
    the model's answer, so the agent never runs it (a call of it by a model that
    did not run it gets an error result).

    Attributes:
        spec: The provider's tool definition.
    """

    spec: Mapping[str, Any] = field(default_factory=dict)


def provider_tool(spec: Mapping[str, Any]) -> ProviderTool:
    """A :class:`ProviderTool` for ``spec`` (named by its ``name``, else its ``type``).

    Raises:
        ConfigurationError: ``spec`` has no ``type`` (a string).
    """
    kind = spec.get("type")
    if not isinstance(kind, str) or not kind:
        raise ConfigurationError(
            f"a tool given as a dict is a provider's own tool and needs a 'type': {dict(spec)!r}"
        )
    name = str(spec.get("name") or kind)

    def refuse(**_: object) -> str:
        raise ToolError(f"{name} runs on the model provider's side, not in the agent")

    return ProviderTool(
        name=name,
        description=str(spec.get("description", "")),
        parameters={"type": "object", "properties": {}},
        fn=refuse,
        args_model=_ANY_ARGS,
        is_async=False,
        spec=dict(spec),
    )


_ANY_ARGS = create_model("provider_tool_args", __config__=ConfigDict(extra="allow"))


@overload
def tool(fn: Callable[..., object], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., object]], Tool]: ...


def tool(
    fn: Callable[..., object] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool | Callable[[Callable[..., object]], Tool]:
    """Turn a function into a :class:`Tool`; usable bare or with overrides.

    Example::

        @tool(name="search")
        async def internet_search(query: str, max_results: int = 5) -> str:
            '''Search the web.

            Args:
                query: What to look for.
                max_results: How many results to return.
            '''
    """

    def build(f: Callable[..., object]) -> Tool:
        return _build_tool(f, name=name, description=description)

    return build(fn) if fn is not None else build


def as_tool(obj: Tool | Callable[..., object] | Mapping[str, Any]) -> Tool:
    """A :class:`Tool` as is, a function made into one, or a provider's tool dict
    as a :class:`ProviderTool`."""
    if isinstance(obj, Tool):
        return obj
    if _is_langchain_tool(obj):
        # Named, not imported: deepactors runs without LangChain installed, and
        # the adapter sits above this module (it builds on Tool).
        convert = importlib.import_module(_LANGCHAIN_ADAPTER).from_langchain_tool
        return cast(Tool, convert(obj))
    if callable(obj):
        return _build_tool(obj, name=None, description=None)
    if isinstance(obj, Mapping):
        return provider_tool(obj)
    raise ConfigurationError(
        f"not a tool: {obj!r} (pass a function, a Tool, a LangChain tool, or a provider's "
        "tool dict such as {'type': 'web_search_preview'})"
    )


_LANGCHAIN_ADAPTER = "deepactors.langchain"


def _is_langchain_tool(obj: object) -> bool:
    """A ``langchain_core`` ``BaseTool``, told by its class (LangChain itself not imported)."""
    return any(
        cls.__name__ == "BaseTool" and cls.__module__.startswith("langchain_core.")
        for cls in type(obj).__mro__
    )


_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _build_tool(fn: Callable[..., object], *, name: str | None, description: str | None) -> Tool:
    tool_name = name or getattr(fn, "__name__", None)
    if not tool_name or not _NAME_RE.match(tool_name):
        raise ConfigurationError(
            f"tool name {tool_name!r} must be 1-64 letters, digits, '_' or '-'"
        )
    summary, arg_docs = _parse_docstring(inspect.getdoc(fn) or "")
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ConfigurationError(
            f"cannot read the type hints of tool {tool_name!r}: {exc}"
        ) from exc
    fields: dict[str, Any] = {}
    runtime_param = None
    for pname, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigurationError(f"tool {tool_name!r}: *args/**kwargs cannot be described")
        annotation = hints.get(pname, Any)
        if annotation is ToolRuntime:
            runtime_param = pname
            continue
        default = ... if param.default is param.empty else param.default
        fields[pname] = (annotation, FieldInfo(default=default, description=arg_docs.get(pname)))
    try:
        args_model = create_model(
            f"{tool_name}_args", __config__=ConfigDict(extra="forbid"), **fields
        )
        parameters = _clean_schema(args_model.model_json_schema())
    except PydanticUserError as exc:
        raise ConfigurationError(
            f"tool {tool_name!r}: {_undescribable(fields)} cannot be described to a model "
            "(pydantic has no JSON schema for it): use JSON-like types, dataclasses or "
            "pydantic models"
        ) from exc
    return Tool(
        name=tool_name,
        description=description or summary or tool_name,
        parameters=parameters,
        fn=fn,
        args_model=args_model,
        runtime_param=runtime_param,
        is_async=inspect.iscoroutinefunction(fn),
        _fields=tuple(fields),
    )


def _undescribable(fields: Mapping[str, Any]) -> str:
    """The first parameter pydantic cannot make a schema of, and its type, for an error."""
    for pname, (annotation, _) in fields.items():
        try:
            TypeAdapter(annotation).json_schema()
        except PydanticUserError:
            return f"parameter {pname!r} ({getattr(annotation, '__qualname__', annotation)})"
    return "a parameter"


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its text and its ``Args:`` descriptions."""
    summary_lines: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        if re.fullmatch(r"[A-Z][A-Za-z ]*:", stripped):
            section = stripped[:-1].lower()
            current = None
            continue
        if section is None:
            summary_lines.append(line)
        elif section in ("args", "arguments", "parameters"):
            m = re.match(r"^(\*{0,2}\w+)(?:\s*\([^)]*\))?:\s*(.*)$", stripped)
            if m and not line.startswith(" " * 8):
                current = m.group(1).lstrip("*")
                args[current] = m.group(2)
            elif current and stripped:
                args[current] = f"{args[current]} {stripped}".strip()
    return "\n".join(summary_lines).strip(), args


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's generated titles: noise in the model's context, every turn."""

    def walk(node: object, *, in_properties: bool = False) -> object:
        if isinstance(node, dict):
            return {
                k: walk(v, in_properties=(k == "properties"))
                for k, v in node.items()
                if in_properties or k != "title"
            }
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    cleaned = cast(dict[str, Any], walk(schema))
    cleaned.setdefault("properties", {})
    return cleaned


def _describe_validation(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        if err["type"] == "extra_forbidden":
            parts.append(f"unexpected argument {where!r}")
        elif err["type"] == "missing":
            parts.append(f"missing required argument {where!r}")
        else:
            parts.append(f"{where}: {err['msg']}")
    return "invalid arguments: " + "; ".join(parts)


def tool_result_message(call: ToolCall, value: object) -> ToolMessage:
    """Turn what a tool returned into the :class:`ToolMessage` the model sees.

    Text stays text; content blocks stay blocks; ``None`` becomes an empty result;
    anything else is shown as JSON (pydantic models included).
    """
    content: str | list[ContentBlock]
    if isinstance(value, str):
        content = value
    elif isinstance(value, _BLOCK_TYPES):
        content = [value]
    elif isinstance(value, list) and value and all(isinstance(v, _BLOCK_TYPES) for v in value):
        content = list(value)
    elif value is None:
        content = ""
    elif isinstance(value, BaseModel):
        content = value.model_dump_json()
    else:
        try:
            content = json.dumps(value, default=_json_default, ensure_ascii=False)
        except (TypeError, ValueError):
            content = str(value)
    return ToolMessage(tool_call_id=call.id, name=call.name, content=content)


def _json_default(value: object) -> object:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return str(value)


ToolLike = Tool | Callable[..., Any] | Callable[..., Awaitable[Any]] | Mapping[str, Any]


def as_tools(items: Sequence[ToolLike] | None) -> list[Tool]:
    """Tools from a list of tools and functions, refusing duplicate names."""
    tools = [as_tool(t) for t in items or ()]
    seen: set[str] = set()
    for t in tools:
        if t.name in seen:
            raise ConfigurationError(f"two tools are named {t.name!r}")
        seen.add(t.name)
    return tools
