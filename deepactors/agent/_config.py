"""LangGraph's ``config`` argument, read beside deepactors' own keywords.

A deepagents script passes ``config={"configurable": {"thread_id": "1"},
"recursion_limit": 50}``; deepactors takes ``thread_id=`` directly. Both work;
giving a thread both ways, differently, is an error.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

from ..errors import InputError, ThreadNotSavedWarning

__all__ = ["RunConfig", "read_config", "warn_if_unsaved"]

# Keys LangChain puts in a config that have no meaning here: accepted, unused.
_IGNORED = frozenset({"tags", "metadata", "callbacks", "run_name", "run_id", "max_concurrency"})
_KNOWN = _IGNORED | {"configurable", "recursion_limit"}


class RunConfig:
    """What a config says: the thread, and LangGraph's ``recursion_limit`` (unread:
    :class:`~deepactors.limits.Limits` reads it with the run's other limits)."""

    __slots__ = ("recursion_limit", "thread_id")

    def __init__(self, thread_id: str | None, recursion_limit: object) -> None:
        self.thread_id = thread_id
        self.recursion_limit = recursion_limit


def read_config(config: Mapping[str, object] | None, thread_id: str | None) -> RunConfig:
    """The thread and the recursion limit of a run, from ``config`` and ``thread_id``.

    Raises:
        InputError: A malformed config, or two different thread ids.
    """
    if config is None:
        return RunConfig(thread_id, None)
    if not isinstance(config, Mapping):
        raise InputError(f"config must be a dict like {{'configurable': {{...}}}}, not {config!r}")
    unknown = set(config) - _KNOWN
    if unknown:
        raise InputError(
            f"unknown config key(s) {sorted(unknown)}; deepactors reads 'configurable' "
            "(thread_id) and 'recursion_limit'"
        )
    configurable = config.get("configurable") or {}
    if not isinstance(configurable, Mapping):
        raise InputError("config['configurable'] must be a dict")
    for key in ("checkpoint_id", "checkpoint_ns"):
        if configurable.get(key):
            raise InputError(
                f"config['configurable'][{key!r}] (running from a past checkpoint) is not "
                "supported; read past states with aget_state(thread_id, upto_seq=...)"
            )
    from_config = configurable.get("thread_id")
    if from_config is not None and thread_id is not None and from_config != thread_id:
        raise InputError(
            f"two thread ids: thread_id={thread_id!r} and config thread_id={from_config!r}"
        )
    chosen = thread_id if thread_id is not None else from_config
    return RunConfig(chosen, config.get("recursion_limit"))


def warn_if_unsaved(thread_id: str | None, *, checkpointer: object, runtime: object) -> None:
    """Warn when a thread is named but nothing will remember it after this run.

    The rule: a checkpointer remembers threads; without one, a thread lives in
    memory only as long as its thread actor, which a call without a runtime does
    not keep (within ``open_runtime`` it lives until idle for ``idle_timeout``).
    """
    if thread_id is not None and checkpointer is None and runtime is None:
        warnings.warn(
            f"thread_id={thread_id!r} but this agent has no checkpointer and the run has no "
            "runtime: the thread is not kept, so the next call will not see this "
            "conversation. Pass checkpointer=MemoryCheckpointer() (or SqliteCheckpointer) to "
            "create_deep_agent, or run under open_runtime().",
            ThreadNotSavedWarning,
            stacklevel=3,
        )
