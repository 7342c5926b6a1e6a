"""What can be told about a SQLite file's integrity beside SQLite's own checks.

SQLite checks its page structure, not what the pages say, nor whether the file
it has open is still the one at its path. Three checks fill the gaps, each run
in the connection's thread (they stat or read the file):

- **Damage visible in the file** (:func:`diagnose`, :func:`emptied`): a file
  truncated under another connection, which SQLite reports only as "database is
  locked".
- **The file's identity** (:func:`identity`): the device and inode of the file
  at the path. A file deleted while open stays writable through the open
  handle, and every commit "succeeds" into an inode that is freed at close; a
  file renamed over ours leaves us writing to the old one. Comparing the
  identity after each operation with the one seen at the first open turns both
  into an error.
- **A checksum per record** (:func:`record_crc`, the SQL function
  ``deepactors_crc32``): a byte changed in a data page, which SQLite reads back
  as a valid but different value. CRC32 (``zlib``: no dependency, and cheap
  beside a commit) detects every change of up to 32 consecutive bits and all
  but one in 2**32 of the others.
"""

from __future__ import annotations

import os
import sqlite3
import struct
import zlib

__all__ = ["CRC_FUNCTION", "diagnose", "emptied", "identity", "record_crc", "register_crc"]

_HEADER = b"SQLite format 3\x00"


def identity(file: str) -> tuple[int, int] | None:
    """The file's ``(st_dev, st_ino)``, None when nothing is at the path. Blocking.

    Raises:
        OSError: The path cannot be looked at (other than not being there).
    """
    try:
        st = os.stat(file)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return (st.st_dev, st.st_ino)


def record_crc(*fields: object) -> int:
    """CRC32 of a record's fields, in order; text as UTF-8, floats by their ``repr``.

    The same fields give the same checksum whether they come from Python when
    written (``str``) or from SQLite when read (``bytes``, through a cast). An
    integer stored in a REAL column is read back as a float: callers pass
    ``float(created_at)`` on both sides.
    """
    parts: list[bytes] = []
    for value in fields:
        if isinstance(value, str):
            data = value.encode("utf-8", "surrogatepass")
        elif isinstance(value, bytes):
            data = value
        elif isinstance(value, float):
            data = repr(value).encode()
        elif isinstance(value, int):
            data = str(int(value)).encode()  # a bool is stored, and read back, as 0 or 1
        else:
            data = b"\x00" if value is None else str(value).encode()
        # A length before each field: ("ab", "c") and ("a", "bc") differ.
        parts += (len(data).to_bytes(4, "little"), data)
    return zlib.crc32(b"".join(parts))


CRC_FUNCTION = "deepactors_crc32"
"""The SQL name of :func:`record_crc`, so that an INSERT can checksum values
(such as ``seq``) computed in the statement itself."""


def register_crc(raw: sqlite3.Connection) -> None:
    """Make :data:`CRC_FUNCTION` callable from SQL on this connection."""
    raw.create_function(CRC_FUNCTION, -1, record_crc, deterministic=True)


def emptied(file: str) -> str | None:
    """The one damage checked before a connection's first statement (see :func:`diagnose`)."""
    if _size(file) == 0 and (_size(file + "-wal") or _index_had_pages(file + "-shm")):
        return "it is empty, though its write-ahead log held pages: it was truncated"
    return None


def diagnose(file: str) -> str | None:
    """What is visibly wrong with a database file, or None. Blocking: in a thread.

    Looked at when SQLite reports "database is locked". A file truncated to
    nothing while another connection still has it open looks busy to a new
    connection, for ever: SQLite takes the empty file for a new database,
    deletes the write-ahead log it finds beside it, and then cannot switch it
    to WAL under the other connection's lock. What is left to tell is the
    shared-memory index of that log, which still says the database had pages.
    """
    if file == ":memory:" or file.startswith("file:"):
        return None
    try:
        size = os.stat(file).st_size
        if size == 0:
            return emptied(file)
        with open(file, "rb") as f:
            header = f.read(100)
    except OSError:
        return None
    if len(header) < 100 or not header.startswith(_HEADER):
        return "its header is not a SQLite header"  # pragma: no cover - SQLite says NOTADB
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size and size % page_size:
        return f"it is {size} bytes long, not a whole number of {page_size}-byte pages: truncated"
    return None


def _size(file: str) -> int:
    try:
        return os.stat(file).st_size
    except OSError:
        return 0


# The start of the WAL index header (in the -shm file, native byte order):
# version, unused, change counter, is-initialised, checksum order, page size,
# frames in the log, pages in the database.
_INDEX_HEADER = struct.Struct("=IIIBBHII")


def _index_had_pages(shm: str) -> bool:
    try:
        with open(shm, "rb") as f:
            head = f.read(_INDEX_HEADER.size)
    except OSError:
        return False
    if len(head) < _INDEX_HEADER.size:
        return False
    fields: tuple[int, ...] = _INDEX_HEADER.unpack(head)
    initialised, frames, pages = fields[3], fields[6], fields[7]
    return initialised == 1 and (frames > 0 or pages > 0)
