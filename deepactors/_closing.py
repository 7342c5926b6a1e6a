"""``async with`` for objects that close with ``aclose()``: defined once, not once per class."""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["AsyncClosing"]


class AsyncClosing:
    """Mixin: ``async with obj:`` gives ``obj`` and awaits ``obj.aclose()`` on the way out.

    For checkpointers, stores and models whose resources belong to event-loop
    runs: subclasses define :meth:`aclose`.
    """

    __slots__ = ()

    async def aclose(self) -> None:
        """Release what the object holds now; subclasses define it."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
