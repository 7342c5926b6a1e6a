"""History views: model requests share the history without a copy, and never see it change."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deepactors import AssistantMessage, ToolCall, ToolMessage, UserMessage, create_deep_agent
from deepactors.history import MessageList, MessageView
from deepactors.messages import Message
from deepactors.models import ModelRequest, ScriptedModel
from deepactors.state import REMOVE_ALL_MESSAGES, RemoveMessage, add_messages


def _history(*texts: str) -> tuple[MessageList, list[Message]]:
    items: list[Message] = [UserMessage(content=t) for t in texts]
    return MessageList(items), items


def test_a_view_reads_like_the_list_it_was_made_from() -> None:
    msgs, items = _history("a", "b", "c")
    view = msgs.view()
    assert isinstance(view, MessageView)
    assert len(view) == 3
    assert view[0] is items[0]
    assert view[-1] is items[2]
    assert view[1:] == items[1:]
    assert list(reversed(view)) == items[::-1]
    assert view == items
    assert view == tuple(items)
    assert items == view
    assert view != items[:2]
    assert items[1] in view
    assert view.index(items[2]) == 2
    assert view + [items[0]] == [*items, items[0]]  # noqa: RUF005  (the operator itself)
    assert [items[0]] + view == [items[0], *items]  # noqa: RUF005
    with pytest.raises(IndexError):
        view[3]
    with pytest.raises(IndexError):
        view[-4]
    with pytest.raises(TypeError):
        hash(view)


_BOUND = st.none() | st.integers(-15, 15)


@given(
    made_at=st.integers(0, 8),
    grown=st.integers(0, 5),
    start=_BOUND,
    stop=_BOUND,
    step=st.none() | st.integers(-3, 3).filter(bool),
    changed=st.booleans(),
)
def test_any_slice_of_a_view_is_that_slice_of_what_it_saw(
    made_at: int, grown: int, start: int | None, stop: int | None, step: int | None, changed: bool
) -> None:
    msgs, items = _history(*(str(i) for i in range(made_at)))
    view = msgs.view()
    add_messages(msgs, [UserMessage(content=f"later {i}") for i in range(grown)])
    if changed and msgs:
        del msgs[0]  # a change other than appends: the view reads its own copy
    assert view[start:stop:step] == items[start:stop:step]


def test_a_view_does_not_see_messages_appended_after_it() -> None:
    msgs, items = _history("a")
    view = msgs.view()
    add_messages(msgs, [UserMessage(content="b")])
    msgs.append(UserMessage(content="c"))
    msgs.extend([UserMessage(content="d")])
    assert view == items
    assert [m.text for m in view] == ["a"]
    assert [m.text for m in msgs.view()] == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(
            lambda m: add_messages(m, [m[0].model_copy(update={"content": "A"})]),
            id="replace-by-id",
        ),
        pytest.param(lambda m: add_messages(m, [RemoveMessage(m[0].id)]), id="remove-by-id"),
        pytest.param(
            lambda m: add_messages(m, [RemoveMessage(REMOVE_ALL_MESSAGES)]), id="remove-all"
        ),
        pytest.param(lambda m: m.__setitem__(1, UserMessage(content="x")), id="setitem"),
        pytest.param(lambda m: m.__delitem__(slice(0, 2)), id="delitem"),
        pytest.param(lambda m: m.insert(0, UserMessage(content="x")), id="insert"),
        pytest.param(lambda m: m.pop(), id="pop"),
        pytest.param(lambda m: m.remove(m[1]), id="remove"),
        pytest.param(lambda m: m.clear(), id="clear"),
        pytest.param(lambda m: m.reverse(), id="reverse"),
        pytest.param(lambda m: m.sort(key=lambda x: x.text, reverse=True), id="sort"),
    ],
)
def test_a_view_keeps_its_messages_when_the_list_changes_in_place(change: object) -> None:
    msgs, items = _history("a", "b", "c")
    before = msgs.view()
    iterating = iter(before)
    assert next(iterating) is items[0]
    change(msgs)  # type: ignore[operator]
    assert before == items
    assert list(iterating) == items[1:]
    # The list's own index follows the change; a new view shows the new state.
    assert all(msgs.index_of(m.id) == i for i, m in enumerate(msgs))
    assert msgs.view() == list(msgs)


def test_views_made_between_changes_each_keep_their_own_messages() -> None:
    msgs, items = _history("a", "b")
    first = msgs.view()
    add_messages(msgs, [UserMessage(content="c")])
    second = msgs.view()
    add_messages(msgs, [RemoveMessage(items[0].id)])
    third = msgs.view()
    add_messages(msgs, [RemoveMessage(REMOVE_ALL_MESSAGES)])
    assert [m.text for m in first] == ["a", "b"]
    assert [m.text for m in second] == ["a", "b", "c"]
    assert [m.text for m in third] == ["b", "c"]
    assert len(msgs.view()) == 0


def test_a_copied_or_pickled_history_is_independent_of_the_original_views() -> None:
    msgs, items = _history("a", "b")
    view = msgs.view()
    for clone in (copy.copy(msgs), copy.deepcopy(msgs), pickle.loads(pickle.dumps(msgs))):
        assert isinstance(clone, MessageList)
        assert clone == items
        clone.clear()
        assert view == items
        assert msgs == items


async def test_a_model_that_keeps_its_requests_sees_each_turn_as_it_was() -> None:
    call = ToolCall(name="note", args={"text": "x"})
    model = ScriptedModel([AssistantMessage(tool_calls=[call]), AssistantMessage(content="done")])

    async def note(text: str) -> str:
        """Take a note.

        Args:
            text: The note.
        """
        return "noted"

    agent = create_deep_agent(model, tools=[note])
    result = await agent.ainvoke("go")
    first, second = (r.messages for r in model.requests)
    assert [m.role for m in first] == ["user"]
    assert [m.role for m in second] == ["user", "assistant", "tool"]
    assert isinstance(second[2], ToolMessage)
    assert len(result["messages"]) == 4


def test_a_request_may_replace_the_history_with_any_sequence() -> None:
    msgs, items = _history("a", "b")
    request = ModelRequest(messages=msgs.view())
    shorter = request.replace(messages=request.messages[1:])
    assert shorter.messages == items[1:]
    assert request.messages == items


def test_a_later_view_extends_an_earlier_one_only_across_appends() -> None:
    msgs, items = _history("a", "b")
    first = msgs.view()
    add_messages(msgs, [UserMessage(content="c")])
    second = msgs.view()
    assert second.extends(first)
    assert first.extends(first)
    assert not first.extends(second)  # shorter
    # A replace by id in between: the later view is no longer the earlier plus more.
    add_messages(msgs, [UserMessage(id=items[0].id, content="A")])
    third = msgs.view()
    assert not third.extends(second)
    assert [m.text for m in second] == ["a", "b", "c"]  # unchanged, still
    add_messages(msgs, [UserMessage(content="d")])
    assert msgs.view().extends(third)
    # Views of another list never extend each other.
    other, _ = _history("a", "b")
    assert not other.view().extends(first)


def _chars(messages: Sequence[Message]) -> int:
    return sum(len(m.text) for m in messages)


def _words(messages: Sequence[Message]) -> int:
    return sum(len(m.text.split()) for m in messages)


_steps = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.text(max_size=6)),
        st.tuples(st.just("replace"), st.integers(0, 30), st.text(max_size=6)),
        st.tuples(st.just("remove"), st.integers(0, 30)),
        st.tuples(st.just("append"), st.text(max_size=6)),  # list.append, no put()
        st.tuples(st.just("reverse")),
        st.tuples(st.just("view")),
        st.tuples(st.just("total"), st.integers(0, 30), st.sampled_from([_chars, _words])),
    ),
    max_size=40,
)


@given(_steps)
def test_a_views_total_is_the_sum_of_its_messages_after_any_changes(
    steps: list[tuple[Any, ...]],
) -> None:
    msgs, _ = _history("first")
    views = [msgs.view()]
    for step in steps:
        kind = step[0]
        if kind == "put":
            msgs.put(UserMessage(content=step[1]))
        elif kind == "replace" and len(msgs):
            old = msgs[step[1] % len(msgs)]
            msgs.put(UserMessage(id=old.id, content=step[2]))
        elif kind == "remove" and len(msgs):
            msgs.remove_id(msgs[step[1] % len(msgs)].id)
        elif kind == "append":
            msgs.append(UserMessage(content=step[1]))
        elif kind == "reverse":
            msgs.reverse()
        elif kind == "view":
            views.append(msgs.view())
        elif kind == "total":
            view, measure = views[step[1] % len(views)], step[2]
            assert view.total(measure) == measure(list(view))
    for view in views:
        assert view.total(_chars) == _chars(list(view))
        assert view.total(_words) == _words(list(view))


def test_a_views_total_counts_each_message_once_and_follows_replacements() -> None:
    msgs, _ = _history("ab", "cde")
    seen: list[str] = []

    def measure(messages: Sequence[Message]) -> int:
        seen.extend(m.text for m in messages)
        return sum(len(m.text) for m in messages)

    first = msgs.view()
    assert first.total(measure) == 5
    add_messages(msgs, [UserMessage(content="fghi")])
    second = msgs.view()
    assert second.total(measure) == 9
    assert seen == ["ab", "cde", "fghi"]  # the new message only
    assert first.total(measure) == 5  # an older view than the tally
    # Appended after the tally, then replaced before it is counted: counted once, new.
    seen.clear()
    add_messages(msgs, [UserMessage(content="jk")])
    add_messages(msgs, [UserMessage(id=msgs[3].id, content="lmnop")])
    # A counted message replaced: the sum follows, without counting the rest again.
    add_messages(msgs, [UserMessage(id=msgs[0].id, content="x")])
    assert msgs.view().total(measure) == 1 + 3 + 4 + 5
    assert sorted(seen) == ["ab", "lmnop", "x"]  # the replaced pair, then the new message
    assert second.total(measure) == 9  # a copy now: its own messages


def test_a_history_keeps_running_sums_for_a_bounded_number_of_measures() -> None:
    msgs, _ = _history("ab", "cde")
    view = msgs.view()
    for _ in range(50):  # a new function each time: each total is still right
        assert view.total(lambda ms: sum(len(m.text) for m in ms)) == 5
    assert len(msgs._tallies or {}) <= 8


def test_catching_up_measures_the_new_messages_once_before_the_next_total() -> None:
    msgs, _ = _history("ab", "cde")
    seen: list[str] = []

    def measure(messages: Sequence[Message]) -> int:
        seen.extend(m.text for m in messages)
        return sum(len(m.text) for m in messages)

    assert msgs.view().total(measure) == 5
    add_messages(msgs, [UserMessage(content="fghi"), UserMessage(content="j")])
    seen.clear()
    msgs.catch_up()  # what a wide tool step does per slice of its results
    assert seen == ["fghi", "j"]
    seen.clear()
    assert msgs.view().total(measure) == 10
    assert seen == []  # nothing left to measure at the model call
    msgs.catch_up()  # up to date: nothing measured again
    assert seen == []
    fresh, _ = _history("ab")
    fresh.catch_up()  # no running sum asked for yet: nothing to do
    assert fresh._tallies is None
