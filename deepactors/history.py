"""Conversation histories: the ``messages`` channel's list, and the snapshots it hands out.

:class:`MessageList` indexes its messages' ids (replace-by-id in O(1)) and gives
model requests a :class:`MessageView`: an O(1) read-only snapshot that does not
change when the actor appends or edits later, so a history is never copied per turn.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, final, overload

from .messages import Message

__all__ = ["MessageList", "MessageView"]


class _Shared:
    """The views a history has handed out since it last changed other than by appending.

    ``items`` is None while they read the live list; it is set to a copy when the
    list is about to change in place, so what they show never changes.
    """

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[Message] | None = None


Measure = Callable[[Sequence[Message]], int]
"""A size of some messages, additive: ``m(a + b) == m(a) + m(b)``. See :meth:`MessageView.total`."""


_MAX_TALLIES = 8  # measures a history keeps running sums for


class _Tally:
    """A running sum of ``measure`` over a history's first ``count`` messages."""

    __slots__ = ("count", "measure", "total")

    def __init__(self, measure: Measure) -> None:
        self.measure = measure
        self.count = 0
        self.total = 0


@final
class MessageList(list[Message]):
    """A conversation: a list that indexes its ids and hands out O(1) snapshots.

    The index keeps replace-by-id O(1) for long threads. :meth:`view` is how a
    model request gets the history without a copy per turn: appending leaves the
    views alone (each has its own length); any other change (replacing or removing
    a message, by the reducer or by a list method) first gives the views made so
    far a copy of their items, once, so a view never changes.
    """

    __slots__ = ("_index", "_shared", "_tallies", "_tally")

    def __init__(self, items: Iterable[Message] = ()) -> None:
        super().__init__(items)
        self._index = {m.id: i for i, m in enumerate(self)}
        # No reference from here back to the views, and none from a view's
        # _Shared back to this list: no cycle for the collector to find.
        self._shared: _Shared | None = None
        # A running sum for each measure a view was asked to total
        # (MessageView.total): what the list's first ``count`` messages measure.
        self._tallies: dict[Measure, _Tally] | None = None
        # The one of them last asked for, found without the dict (the common
        # case: one measure, asked before every model call).
        self._tally: _Tally | None = None

    def __reduce__(self) -> tuple[object, ...]:
        # copy/pickle: a new list with no views (the slots would share _shared).
        return (type(self), (list(self),))

    def index_of(self, message_id: str) -> int | None:
        """Position of the message with this id, or None."""
        return self._index.get(message_id)

    def view(self) -> MessageView:
        """The messages as they are now, as a sequence that never changes. O(1)."""
        shared = self._shared
        if shared is None:
            shared = self._shared = _Shared()
        return MessageView(self, shared, len(self))

    def put(self, message: Message) -> None:
        """Append ``message``, or replace the message with its id."""
        pos = self._index.get(message.id)
        if pos is None:
            self._index[message.id] = len(self)
            self.append(message)  # the tallies catch up when next asked
        else:
            self._detach()
            old = self[pos]
            list.__setitem__(self, pos, message)  # same id, same place: the index holds
            if self._tallies:
                for tally in self._tallies.values():
                    if pos < tally.count:
                        tally.total += tally.measure((message,)) - tally.measure((old,))

    def catch_up(self) -> None:
        """Bring the running sums (see :meth:`MessageView.total`) up to the list's end.

        What they would measure at the next ``total`` anyway, done now: a caller
        that appends many messages in slices (a wide tool step's results) calls
        it per slice, so the next model call's measure is not a pass over them all.
        """
        tallies = self._tallies
        if not tallies:
            return
        n = len(self)
        for tally in tallies.values():
            if tally.count < n:
                tally.total += tally.measure(self[tally.count : n])
                tally.count = n

    def remove_id(self, message_id: str) -> None:
        """Remove the message with this id, if present."""
        pos = self._index.get(message_id)
        if pos is not None:
            del self[pos]

    def _detach(self) -> None:
        shared = self._shared
        if shared is not None:
            shared.items = list(self)
            self._shared = None

    def _reindex(self) -> None:
        self._index = {m.id: i for i, m in enumerate(self)}
        self._tallies = self._tally = None  # changed in place: counted again when next asked


def _changing_in_place(name: str) -> Any:
    """``list.<name>``, after which the views made so far read a copy of their items."""
    base = getattr(list, name)

    def method(self: MessageList, *args: Any, **kwargs: Any) -> Any:
        self._detach()
        result = base(self, *args, **kwargs)
        self._reindex()
        return result

    method.__name__ = method.__qualname__ = name
    method.__doc__ = base.__doc__
    return method


# Every list method that changes a list other than by appending. (The reducer
# replaces and removes through these too, so it never bypasses them.)
for _name in (
    "__setitem__",
    "__delitem__",
    "__imul__",
    "insert",
    "pop",
    "remove",
    "clear",
    "sort",
    "reverse",
):
    setattr(MessageList, _name, _changing_in_place(_name))


@final
class MessageView(Sequence[Message]):
    """A read-only snapshot of a :class:`MessageList`, made in O(1) by :meth:`~MessageList.view`.

    It reads the live list while that only grows (up to the length it was made
    with), and a copy once the list changes otherwise. It compares equal to a
    list or tuple of the same messages; ``+`` with one gives a list.
    """

    __slots__ = ("_len", "_list", "_shared")

    def __init__(self, source: MessageList, shared: _Shared, length: int) -> None:
        self._list = source
        self._shared = shared
        self._len = length

    def extends(self, earlier: MessageView) -> bool:
        """Whether this view is ``earlier``'s messages with more appended, in O(1).

        True when both were made from one list with no change but appends in
        between (a replace or remove gives later views another snapshot group);
        False says only that O(1) cannot tell.
        """
        return (
            self._shared is earlier._shared
            and self._list is earlier._list
            and earlier._len <= self._len
        )

    def total(self, measure: Measure) -> int:
        """``measure(view)``, in time proportional to the messages new since last asked.

        ``measure`` sizes a run of messages and must be additive (the size of
        ``a + b`` is the size of ``a`` plus that of ``b``) and depend only on the
        messages (they are frozen). The history keeps a running sum for each
        measure a view of it was asked for (by identity: pass the same function
        each time), so successive views (an agent's model calls) measure each
        message once, not the whole history per call. A replace by id adjusts the
        sum; other changes in place make it start again.
        """
        live = self._list
        tally = live._tally
        if tally is None or tally.measure is not measure or self._shared.items is not None:
            return self._total_slow(measure)
        count, length = tally.count, self._len
        if count == length:
            return tally.total
        if count < length:  # measure what was appended since
            total = tally.total + measure(live[count:length])
            tally.total, tally.count = total, length
            return total
        # An older view than the tally: take off what came after it.
        return tally.total - measure(live[length:count])

    def _total_slow(self, measure: Measure) -> int:
        """:meth:`total` for a view that reads a copy, or a measure not asked for last."""
        if self._shared.items is not None:  # a copy: the live list has changed since
            return measure(self[:])
        live = self._list
        tallies = live._tallies
        if tallies is None:
            tallies = live._tallies = {}
        tally = tallies.get(measure)
        if tally is None:
            if len(tallies) >= _MAX_TALLIES:
                tallies.clear()  # a new function per call, say: never an unbounded dict
            tally = tallies[measure] = _Tally(measure)
        live._tally = tally
        return self.total(measure)

    def _items(self) -> list[Message]:
        items = self._shared.items
        return self._list if items is None else items

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        n = self._len
        if isinstance(index, slice):
            # Only the slice is copied, not the view's first n messages first (the
            # tail of a long history is asked for on every model call).
            start, stop, step = index.indices(n)
            if step > 0:  # indices() clamps both ends into [0, n]
                return self._items()[start:stop:step]
            return self._items()[:n][index]  # backwards: -1 in indices() means "past 0"
        i = index.__index__()
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("message index out of range")
        return self._items()[i]

    def __iter__(self) -> Iterator[Message]:
        items = self._shared.items
        if items is not None:  # a copy nobody changes
            return itertools.islice(items, self._len)
        return self._iter_live()

    def _iter_live(self) -> Iterator[Message]:
        # Looks the source up per item: a change to the list during a long
        # iteration moves the rest of it to the copy.
        shared, live = self._shared, self._list
        for i in range(self._len):
            items = shared.items
            yield live[i] if items is None else items[i]

    def __reversed__(self) -> Iterator[Message]:
        return reversed(self[:])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MessageView | list | tuple):
            return len(other) == self._len and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # like a list: equal to lists

    def __add__(self, other: Iterable[Message]) -> list[Message]:
        return [*self, *other]

    def __radd__(self, other: Iterable[Message]) -> list[Message]:
        return [*other, *self]

    def __repr__(self) -> str:
        return f"MessageView({list(self)!r})"
