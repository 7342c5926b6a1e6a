"""A command's output as it is read: the first bytes kept, the rest only counted.

The local shell and the sandboxes keep output the same way and say the same
thing when they cut it, so the model reads one note whichever ran the command.
"""

from __future__ import annotations

__all__ = ["CappedOutput"]


class CappedOutput:
    """Output read in chunks: the first ``keep`` bytes kept, every byte counted.

    Args:
        keep: Bytes kept; the rest is read and dropped.
    """

    __slots__ = ("_keep", "kept", "total")

    def __init__(self, keep: int) -> None:
        self._keep = keep
        self.kept = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        """Count ``chunk``, and keep what of it still fits."""
        self.total += len(chunk)
        room = self._keep - len(self.kept)
        if room > 0:
            self.kept += chunk[:room]

    @property
    def truncated(self) -> bool:
        """Whether more was read than kept."""
        return self.total > len(self.kept)

    def text(self) -> str:
        """What was kept, decoded as UTF-8 (undecodable bytes replaced)."""
        return self.kept.decode("utf-8", errors="replace")

    def truncation_note(self) -> str:
        """The note that tells the model its output was cut, and how to get the rest."""
        return (
            f"\n[output truncated: showing the first {len(self.kept)} of {self.total} bytes; "
            "redirect to a file and read or grep it for the rest]"
        )
