"""``create_deep_agent``'s keywords: deepagents' ones in its signature, deepactors'
own as ``**options`` typed by ``AgentOptions`` (issue 39), parsed in one place."""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing

import pytest

import deepactors
from deepactors import (
    AgentOptions,
    MemoryCheckpointer,
    StepLimitExceeded,
    ToolCall,
    create_deep_agent,
)
from deepactors.assembly import _assemble, _options
from deepactors.limits import Breakpoints
from deepactors.messages import AssistantMessage
from deepactors.middleware import DEFAULT_MAX_CONCURRENT_SUBAGENTS, SubAgentMiddleware
from deepactors.models import FunctionModel, ModelRequest, ScriptedModel


def _task_layer(agent: deepactors.DeepAgent) -> SubAgentMiddleware:
    (layer,) = [mw for mw in agent.spec.middleware if isinstance(mw, SubAgentMiddleware)]
    return layer


def test_left_out_options_keep_their_defaults() -> None:
    agent = create_deep_agent(ScriptedModel(["hi"]))
    assert agent.spec.max_steps == 1000
    assert agent.spec.breakpoints == Breakpoints()
    task = _task_layer(agent)
    assert task.max_concurrent == DEFAULT_MAX_CONCURRENT_SUBAGENTS
    assert task.max_concurrent_total is None


def test_given_options_reach_the_agent() -> None:
    agent = create_deep_agent(
        ScriptedModel(["hi"]),
        checkpointer=MemoryCheckpointer(),
        max_steps=7,
        max_concurrent_subagents=None,
        max_concurrent_subagents_total=3,
        interrupt_before="tools",
        interrupt_after=["model"],
    )
    assert agent.spec.max_steps == 7
    assert agent.spec.breakpoints == Breakpoints(
        before=frozenset({"tools"}), after=frozenset({"model"})
    )
    task = _task_layer(agent)
    assert task.max_concurrent is None  # None given: no cap, not the default
    assert task.max_concurrent_total == 3


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"max_step": 5}, "an unexpected keyword argument 'max_step' (did you mean 'max_steps'?)"),
        # A misspelt deepagents keyword lands among the options too.
        (
            {"system_promt": "x"},
            "an unexpected keyword argument 'system_promt' (did you mean 'system_prompt'?)",
        ),
        ({"frobnicate": 1}, "an unexpected keyword argument 'frobnicate'"),
        (
            {"zzz": 1, "placment": None},
            "unexpected keyword arguments 'placment' (did you mean 'placement'?), 'zzz'",
        ),
    ],
)
def test_an_unknown_keyword_is_a_type_error_naming_the_close_match(
    given: dict[str, object], named: str
) -> None:
    with pytest.raises(TypeError) as caught:
        create_deep_agent(ScriptedModel(["hi"]), **given)  # type: ignore[arg-type]
    assert str(caught.value) == f"create_deep_agent() got {named}"


@pytest.mark.anyio
async def test_an_option_holds_in_a_run() -> None:
    def busy(request: ModelRequest) -> AssistantMessage:  # never answers: always a tool
        return AssistantMessage(tool_calls=[ToolCall(name="write_todos", args={"todos": []})])

    agent = create_deep_agent(FunctionModel(busy), max_steps=2)
    with pytest.raises(StepLimitExceeded):
        await agent.ainvoke("go")


def test_the_call_record_has_the_signature_s_parameters_and_types() -> None:
    # create_deep_agent hands on locals() as a DeepAgentCall: the names must match
    # (else every call fails), and the types too (else the assembly reads them wrong).
    signature = inspect.signature(create_deep_agent).parameters
    fields = {f.name: f.type for f in dataclasses.fields(_assemble.DeepAgentCall)}
    assert list(fields) == list(signature)
    for name, param in signature.items():
        expected = "AgentOptions" if param.kind is param.VAR_KEYWORD else param.annotation
        assert fields[name] == expected, name


def test_the_settings_are_the_options_with_their_defaults() -> None:
    settings = typing.get_type_hints(_options.AgentSettings)
    assert settings == typing.get_type_hints(AgentOptions)
    assert _options.AgentSettings.parse({}, caller="f") == _options.AgentSettings()


def test_every_option_is_documented() -> None:
    doc = inspect.getdoc(AgentOptions) or ""
    attributes = doc.split("Attributes:\n", 1)[1]
    # An attribute's entry starts one indent in; its continuation lines, two.
    entries = [line for line in attributes.splitlines() if re.match(r"    \w+:", line)]
    documented = [line.split(":")[0].strip() for line in entries]
    assert documented == list(AgentOptions.__annotations__)


def test_agent_options_is_exported_beside_create_deep_agent() -> None:
    assert deepactors.AgentOptions is deepactors.assembly.AgentOptions
    assert AgentOptions.__module__ == "deepactors.assembly"
