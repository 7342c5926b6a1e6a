"""What ``deepactors serve`` serves: ``module:attr``, ``path.py:attr``, or ``langgraph.json``.

``deepactors serve`` with no agent named reads ``langgraph.json`` in the current
folder, as ``langgraph dev`` does: each entry of ``graphs`` is served under its
name (the assistant id clients ask for), from ``./path.py:attr`` or
``package.module:attr``; ``env`` (a mapping, or a ``.env`` file) fills in
environment variables not set already; ``dependencies`` that are local folders
are importable (packages must be installed beforehand: nothing is installed
here). Keys about building images (``dockerfile_lines``, ``python_version``...)
do not apply and are ignored.

The server's persistence is the one in force: an agent that brought its own
in-memory checkpointer or store (``create_deep_agent(interrupt_on=...)`` asks
for a checkpointer) has it replaced by ``--db``'s, with a log line; one that
brought a database of its own is refused, naming both, rather than silently
saving its threads somewhere else than ``--db`` says.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._core.logs import get_logger
from ..agent import DeepAgent, import_from, load_target
from ..assembly.demo import build_demo_agent
from ..errors import ConfigurationError, InputError
from ..limits import ttl_seconds
from ..persistence import Checkpointer, MemoryCheckpointer, MemoryStore, Store
from ..persistence.index import Embed, IndexedStore
from ..persistence.ttl import ExpiringStore
from ._thread_ttl import DEFAULT_THREAD_TTL_SWEEP, ThreadTTL
from ._wire_json import TTLStrategy

__all__ = ["CONFIG_FILE", "expiring", "indexed", "load_agents", "with_server_persistence"]

CONFIG_FILE = "langgraph.json"
"""The file ``deepactors serve`` reads when no agent is named."""

_log = get_logger("deepactors.server")


def load_agents(target: str | None) -> dict[str, DeepAgent]:
    """The agents ``deepactors serve`` serves, by assistant id.

    Args:
        target: ``module:attribute`` or ``path/to/file.py:attribute`` (a
            ``DeepAgent``, a dict of them by assistant id, or a function of no
            arguments returning either; a lone agent is served as ``agent``,
            the assistant id Agent Chat UI asks for by default); None: the
            graphs of ``langgraph.json`` in the current folder if there is one,
            else the offline demo agent.

    Raises:
        ConfigurationError: The target cannot be imported or is not agents,
            or ``langgraph.json`` is not one this server can serve.
    """
    if target is None:
        config = Path(CONFIG_FILE)
        if config.is_file():
            return load_config(config)
        return {"agent": build_demo_agent()}
    value = load_target(target, Path.cwd())
    if isinstance(value, DeepAgent):
        return {"agent": value}
    if (
        isinstance(value, Mapping)
        and value
        and all(isinstance(v, DeepAgent) for v in value.values())
    ):
        return dict(value)
    raise ConfigurationError(f"{target} is not a DeepAgent or a dict of them: {value!r}")


def load_config(path: Path) -> dict[str, DeepAgent]:
    """The graphs of a ``langgraph.json``, each a ``DeepAgent`` served under its name.

    Raises:
        ConfigurationError: The file is not JSON, has no graphs, or a graph
            is not a ``DeepAgent``; the error names the file and the graph.
    """
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"{path}: cannot read it as JSON: {exc}") from None
    if not isinstance(config, dict):
        raise ConfigurationError(
            f"{path}: a JSON object with 'graphs', not {type(config).__name__}"
        )
    folder = path.resolve().parent
    _apply_env(config.get("env"), folder, path)
    _add_dependencies(config.get("dependencies"), folder, path)
    graphs = config.get("graphs")
    if not isinstance(graphs, dict) or not graphs:
        raise ConfigurationError(f"{path}: 'graphs' must name at least one graph: {{name: path}}")
    agents: dict[str, DeepAgent] = {}
    for name, spec in graphs.items():
        where = spec.get("path") if isinstance(spec, dict) else spec
        if not isinstance(where, str):
            raise ConfigurationError(
                f"{path}: graph {name!r}: './file.py:attribute' or 'module:attribute', not {spec!r}"
            )
        value = load_target(where, folder)
        if not isinstance(value, DeepAgent):
            raise ConfigurationError(
                f"{path}: graph {name!r} ({where}) is not a DeepAgent: {type(value).__name__}"
            )
        agents[name] = value
    return agents


def indexed(store: Store, path: Path | None = None) -> Store:
    """``store``, searchable by meaning when ``langgraph.json`` asks for it.

    ``"store": {"index": {"embed": ..., "dims": 1536, "fields": ["text"]}}`` as
    LangGraph reads it: ``embed`` is ``module:function`` (or ``./file.py:function``),
    or ``openai:<model>`` (the ``openai`` extra, ``OPENAI_API_KEY``).

    Raises:
        ConfigurationError: The index is not one this server can build.
    """
    path = path if path is not None else Path(CONFIG_FILE)
    if not path.is_file():
        return store
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return store  # load_config says what is wrong with the file
    index = (config.get("store") or {}).get("index") if isinstance(config, dict) else None
    if index is None:
        return store
    if not isinstance(index, dict) or not isinstance(index.get("embed"), str):
        raise ConfigurationError(f"{path}: store.index needs 'embed': 'module:function'")
    spec: str = index["embed"]
    embed: Embed
    if spec.startswith("openai:"):
        embed = _openai_embed(spec.removeprefix("openai:"))
    else:
        module_name, _, attribute = spec.rpartition(":")
        module = import_from(module_name, path.resolve().parent)
        found = getattr(module, attribute, None)  # (IndexedStore checks what it is)
        if found is None:
            raise ConfigurationError(
                f"{path}: store.index.embed: {module_name} has no {attribute!r}"
            )
        embed = found
    fields = index.get("fields") or ["$"]
    return IndexedStore(store, embed=embed, dims=index.get("dims"), fields=fields)


def expiring(store: Store, path: Path | None, default_minutes: float | None = None) -> Store:
    """``store`` with time to live when ``langgraph.json`` (or ``default_minutes``) asks.

    ``"store": {"ttl": {"default_ttl": 1440, "refresh_on_read": true,
    "sweep_interval_minutes": 60}}`` as LangGraph reads it (minutes), in the
    file at ``path`` (None: no file); ``default_minutes`` (``serve --store-ttl``)
    when the file gives no ``default_ttl``. A store wrapped so is one whose
    items may also be given a ``ttl`` one by one.

    Raises:
        ConfigurationError: A setting that is not a number of minutes.
    """
    ttl: Any = None
    if path is not None and path.is_file():
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            config = None  # load_config says what is wrong with the file
        if isinstance(config, dict):
            ttl = (config.get("store") or {}).get("ttl")
    if ttl is None and default_minutes is None:
        return store
    ttl = dict(ttl or {})
    minutes = ttl.get("default_ttl", default_minutes)
    sweep = ttl.get("sweep_interval_minutes", 1)
    where = f"{path}: store.ttl" if path is not None else "--store-ttl"
    default_ttl, sweep_interval = _ttl_settings(where, minutes, sweep)
    return ExpiringStore(
        store,
        default_ttl=default_ttl,
        refresh_on_read=bool(ttl.get("refresh_on_read", True)),
        sweep_interval=sweep_interval,
    )


def _ttl_settings(where: str, minutes: object, sweep: object) -> tuple[float | None, float]:
    """``default_ttl`` and ``sweep_interval_minutes`` read as ``ttl_seconds`` reads
    any time to live, in seconds.

    Raises:
        ConfigurationError: One that is not a number of minutes above 0.
    """
    out: list[float | None] = []
    for name, value in (("default_ttl", minutes), ("sweep_interval_minutes", sweep)):
        label = where if where.startswith("--") else f"{where}.{name}"
        try:
            out.append(ttl_seconds(value, what=label))
        except InputError as exc:
            raise ConfigurationError(str(exc)) from None
    default_ttl, sweep_interval = out
    assert sweep_interval is not None  # (it has a default)
    return default_ttl, sweep_interval


def thread_expiry(
    path: Path | None,
    default_minutes: float | None = None,
    default_strategy: TTLStrategy | None = None,
) -> ThreadTTL:
    """Threads' default time to live, its strategy and the sweep's interval (in seconds).

    ``"checkpointer": {"ttl": {"strategy": "delete", "default_ttl": 43200,
    "sweep_interval_minutes": 60}}`` as LangGraph reads it (minutes), in the
    file at ``path`` (None: no file); ``default_minutes`` and
    ``default_strategy`` (``serve --thread-ttl``, ``--thread-ttl-strategy``)
    when the file gives none.

    Raises:
        ConfigurationError: A setting that is not a number of minutes above 0,
            or a strategy other than ``delete`` and ``keep_latest``.
    """
    ttl: Any = None
    if path is not None and path.is_file():
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            config = None  # load_config says what is wrong with the file
        if isinstance(config, dict):
            ttl = (config.get("checkpointer") or {}).get("ttl")
    where = f"{path}: checkpointer.ttl" if ttl is not None else "--thread-ttl"
    ttl = dict(ttl or {})
    strategy = ttl.get("strategy", default_strategy or "delete")
    if strategy not in ("delete", "keep_latest"):
        raise ConfigurationError(f"{where}.strategy: 'delete' or 'keep_latest', not {strategy!r}")
    minutes = ttl.get("default_ttl", default_minutes)
    sweep = ttl.get("sweep_interval_minutes", DEFAULT_THREAD_TTL_SWEEP / 60)
    seconds, every = _ttl_settings(where, minutes, sweep)
    return ThreadTTL(seconds, "keep_latest" if strategy == "keep_latest" else "delete", every)


def _openai_embed(model: str) -> Callable[[Sequence[str]], Awaitable[list[list[float]]]]:
    try:
        from openai import AsyncOpenAI
    except ImportError as exc:
        raise ConfigurationError(
            f"store.index.embed openai:{model} needs the openai extra: "
            "pip install 'deepactors[openai]'"
        ) from exc
    client = AsyncOpenAI()

    async def embed(texts: Sequence[str]) -> list[list[float]]:
        answer = await client.embeddings.create(model=model, input=list(texts))
        return [d.embedding for d in answer.data]

    return embed


def _apply_env(env: object, folder: Path, path: Path) -> None:
    if env is None:
        return
    if isinstance(env, str):
        env_file = folder / env
        try:
            lines = env_file.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ConfigurationError(f"{path}: env file {env!r}: {exc}") from None
        pairs: dict[str, str] = {}
        for line in lines:
            line = line.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            key, _, value = line.removeprefix("export ").partition("=")
            pairs[key.strip()] = value.strip().strip("'\"")
        env = pairs
    if not isinstance(env, dict):
        raise ConfigurationError(f"{path}: 'env' must be a mapping or a .env file's path")
    for key, value in env.items():
        # The environment the server was started in wins, as with any .env.
        os.environ.setdefault(str(key), str(value))


def _add_dependencies(dependencies: object, folder: Path, path: Path) -> None:
    if dependencies is None:
        return
    if not isinstance(dependencies, list):
        raise ConfigurationError(f"{path}: 'dependencies' must be a list")
    for dependency in dependencies:
        if not isinstance(dependency, str):
            continue
        local = (folder / dependency).resolve()
        if dependency.startswith(".") or local.is_dir():
            _importable(local)
        else:  # a package: installing it is the user's (pip), not the server's
            _log.debug("dependency not installed by deepactors serve", dependency=dependency)


def _importable(folder: Path) -> None:
    entry = str(folder)
    if entry not in sys.path:
        sys.path.insert(0, entry)


def with_server_persistence(
    agents: Mapping[str, DeepAgent], checkpointer: Checkpointer, store: Store | None
) -> dict[str, DeepAgent]:
    """The agents saving their threads where the server does (``--db``).

    An agent's own in-memory checkpointer or store is replaced (logged); an
    agent with its own database is refused.

    Raises:
        ConfigurationError: An agent has a checkpointer or store of its own
            that is not in memory; the error names both.
    """
    served: dict[str, DeepAgent] = {}
    for name, agent in agents.items():
        spec = agent.spec
        changes: dict[str, Any] = {}
        own = spec.checkpointer
        if own is not None and own is not checkpointer:
            if not isinstance(own, MemoryCheckpointer):
                raise ConfigurationError(
                    f"agent {name!r} saves its threads in {own.location}, and --db says "
                    f"{checkpointer.location}: build it without a checkpointer (the server "
                    "gives it --db's), or serve it without --db"
                )
            _log.warning(
                "agent's in-memory checkpointer replaced by --db",
                agent=name,
                db=checkpointer.location,
            )
            changes["checkpointer"] = checkpointer
        if spec.store is not None and store is not None and spec.store is not store:
            if not isinstance(spec.store, MemoryStore):
                raise ConfigurationError(
                    f"agent {name!r} has a store of its own, and --db gives one: build it "
                    "without a store, or serve it without --db"
                )
            _log.warning("agent's in-memory store replaced by --db", agent=name)
            changes["store"] = store
        served[name] = DeepAgent(dataclasses.replace(spec, **changes)) if changes else agent
    return served
