"""How a subagent's agent reaches a Ray worker: by import path, or by Ray's serialization.

An agent named by an import path (``"myproject.agents:researcher"``) is built on
the worker by importing it: nothing of it crosses but the name, and whatever
cannot cross (an SDK client with its connection pool and locks) is made there.
Otherwise the agent spec is pickled once (Ray's cloudpickle, functions and
classes by value where they are not importable) and sent to each worker once.

What belongs to a process rather than to the agent is made anew on the worker
instead of copied: a model's per-event-loop clients (a
:class:`~deepactors._core.perloop.PerLoop`, which the worker's loop fills), its
request limiter (the same limit, per worker process), and locks. So a model made
from ``"anthropic:claude-..."`` crosses (its API key, if given rather than read
from the environment, with it; a worker reads ``ANTHROPIC_API_KEY`` from its own
environment otherwise); a ready SDK client given to a model does not.

When something in the spec cannot be pickled, :func:`ship` says which object it
is, by its place in the spec (``model._client._lock (lock)``), and what to do.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import pickle
import threading
from collections import ChainMap
from collections.abc import Callable, Iterator, Mapping
from types import FunctionType
from typing import Any, ClassVar, NamedTuple

from .._core.perloop import PerLoop
from ..actors import AgentSpec
from ..errors import ConfigurationError
from ..models import RequestLimiter

__all__ = ["SpecPayload", "culprit", "ship", "unship"]


class SpecPayload(NamedTuple):
    """An agent spec on its way to a worker: an import path, or pickled bytes."""

    import_path: str | None
    pickled: bytes | None


def ship(name: str, spec: AgentSpec, import_path: str | None) -> SpecPayload:
    """The payload that makes ``spec`` on a worker.

    Raises:
        ConfigurationError: ``spec`` cannot be pickled; the message names the
            object that cannot, and the way out (an import path).
    """
    if import_path is not None:
        return SpecPayload(import_path, None)
    dumps = _dumps()
    try:
        return SpecPayload(None, dumps(spec))
    except Exception as exc:
        where, why = culprit(spec, dumps) or ("the agent", exc)
        raise ConfigurationError(
            f"subagent {name!r} cannot be sent to Ray workers: {where} cannot be "
            f"pickled ({type(why).__name__}: {why}). Name the agent by import path "
            f"instead, so each worker builds its own: RayPlacement(agents={{{name!r}: "
            "'package.module:attribute'}), the attribute a DeepAgent, an AgentSpec or a "
            "function that returns one"
        ) from None


def unship(payload: SpecPayload) -> AgentSpec:
    """The agent spec a payload makes (on the worker).

    Raises:
        ConfigurationError: The import path names nothing, or not an agent.
    """
    if payload.pickled is not None:
        from ray import cloudpickle

        spec: object = cloudpickle.loads(payload.pickled)
        if not isinstance(spec, AgentSpec):
            raise ConfigurationError(f"a pickled agent unpickled as {type(spec).__name__}")
        return spec
    path = payload.import_path or ""
    module_name, sep, attribute = path.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigurationError(f"agent import path {path!r} must be 'package.module:attribute'")
    try:
        found: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(
            f"agent import path {path!r}: {type(exc).__name__}: {exc}"
        ) from None
    if callable(found) and not _is_agent(found):
        found = found()
    if not isinstance(found, AgentSpec) and isinstance(getattr(found, "spec", None), AgentSpec):
        found = found.spec  # a DeepAgent
    if not isinstance(found, AgentSpec):
        raise ConfigurationError(
            f"agent import path {path!r} names a {type(found).__name__}, not a DeepAgent, "
            "an AgentSpec or a function that returns one"
        )
    return found


def _is_agent(obj: object) -> bool:
    return isinstance(obj, AgentSpec) or isinstance(getattr(obj, "spec", None), AgentSpec)


def _fresh_perloop(
    open: Callable[[], Any], close: Callable[[Any], Any], close_stale: Callable[[Any], Any] | None
) -> PerLoop[Any]:
    return PerLoop(open, close, close_stale=close_stale)


def _reduce_perloop(resources: PerLoop[Any]) -> tuple[Any, ...]:
    # The resources open in this process's loops stay here: the worker opens its own.
    return _fresh_perloop, (resources._open, resources._close, resources._close_stale)


def _reduce_limiter(limiter: RequestLimiter) -> tuple[Any, ...]:
    return RequestLimiter, (limiter.max_in_flight,)


def _reduce_lock(lock: object) -> tuple[Any, ...]:
    return (threading.RLock if type(lock) is _RLOCK else threading.Lock), ()


_RLOCK = type(threading.RLock())
_PER_PROCESS: dict[type, Callable[[Any], tuple[Any, ...]]] = {
    PerLoop: _reduce_perloop,
    RequestLimiter: _reduce_limiter,
    type(threading.Lock()): _reduce_lock,
    _RLOCK: _reduce_lock,
}


def _dumps() -> Callable[[object], bytes]:
    from ray import cloudpickle

    table: Any = ChainMap(_PER_PROCESS, cloudpickle.CloudPickler.dispatch_table)

    class Pickler(cloudpickle.CloudPickler):
        # (The C pickler reads the class's table: an instance's is not seen.)
        dispatch_table: ClassVar[Any] = table  # type: ignore[misc]

    make: Any = Pickler

    def dumps(obj: object) -> bytes:
        buffer = io.BytesIO()
        make(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
        return buffer.getvalue()

    return dumps


def culprit(root: object, dumps: Any, depth: int = 8) -> tuple[str, Exception] | None:
    """The deepest object under ``root`` that ``dumps`` refuses, by its place, and why.

    Walks the parts (fields, attributes, items) of the first refused part, down
    to ``depth`` levels: the object named is the one to give by import path or
    leave out, not the spec that holds it.
    """
    where = ""
    failure: Exception | None = None
    current = root
    seen: set[int] = set()
    for _ in range(depth):
        seen.add(id(current))
        for label, part in _parts(current):
            if id(part) in seen or isinstance(part, str | bytes | int | float | bool | None):
                continue
            try:
                dumps(part)
            except Exception as exc:
                where, failure, current = where + label, exc, part
                break
        else:
            break  # every part pickles on its own: the object itself is the culprit
    if failure is None:
        return None
    return f"{where.lstrip('.')} ({type(current).__name__})", failure


def _parts(obj: object) -> Iterator[tuple[str, object]]:
    """The parts an object's pickle holds, each with how to name it."""
    if isinstance(obj, Mapping):
        for key, value in list(obj.items()):
            yield f"[{key!r}]", value
        return
    if isinstance(obj, list | tuple | set | frozenset):
        for i, value in enumerate(obj):
            yield f"[{i}]", value
        return
    if isinstance(obj, FunctionType):
        # What a function carries by value: the variables it closes over.
        cells = obj.__closure__ or ()
        for name, cell in zip(obj.__code__.co_freevars, cells, strict=False):
            with contextlib.suppress(ValueError):  # (an empty cell)
                yield f".<{name}>", cell.cell_contents
        return
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            if hasattr(obj, f.name):
                yield f".{f.name}", getattr(obj, f.name)
        return
    for name, value in list(getattr(obj, "__dict__", {}).items()):
        yield f".{name}", value
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if hasattr(obj, name) and not name.startswith("__"):
                yield f".{name}", getattr(obj, name)
