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
- **A checksum per record** (:func:`record_crc`, :func:`item_crc`, the latter
  callable from SQL): a byte changed in a data page, which SQLite reads back as
  a valid but different value. CRC32 (``zlib``: no dependency, and cheap beside a
  commit) detects every change of up to 32 consecutive bits and all but one in
  2**32 of the others.
"""

from __future__ import annotations

import os
import sqlite3
import struct
import zlib

__all__ = [
    "ITEM_CRC_FUNCTION",
    "diagnose",
    "emptied",
    "identity",
    "item_crc",
    "record_crc",
    "register_crc",
]

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


def record_crc(
    thread_id: bytes, seq: int, path: bytes, step: int, kind: bytes, created_at: float, data: bytes
) -> int:
    """CRC32 of a checkpoint record's fields: text as its UTF-8 bytes, the time as a float.

    Computed when a record is written, from the values bound to the INSERT, and
    when it is read back, from the columns read as BLOBs: the same bytes.
    (Earlier versions computed it in the INSERT, through a SQL function of the
    same fields: their files hold the same checksums.)
    """
    # Each text after its length: ("ab", "c") and ("a", "bc") differ. A bool
    # step is stored, and read back, as 0 or 1, as %d writes it.
    head = b"%d:%b%d:%d:%b%d:%d:%b%a:" % (
        len(thread_id),
        thread_id,
        seq,
        len(path),
        path,
        step,
        len(kind),
        kind,
        float(created_at),
    )
    return zlib.crc32(data, zlib.crc32(head))


def item_crc(
    namespace: bytes, key: bytes, created_at: float, updated_at: float, value: bytes
) -> int:
    """CRC32 of a store item's fields, as :func:`record_crc` (SQL: :data:`ITEM_CRC_FUNCTION`)."""
    head = b"%d:%b%d:%b%a:%a:" % (
        len(namespace),
        namespace,
        len(key),
        key,
        float(created_at),
        float(updated_at),
    )
    return zlib.crc32(value, zlib.crc32(head))


ITEM_CRC_FUNCTION = "deepactors_item_crc32"
"""The SQL name of :func:`item_crc`."""


def register_crc(raw: sqlite3.Connection) -> None:
    """Make the store's checksum function callable from SQL on this connection."""
    raw.create_function(ITEM_CRC_FUNCTION, 5, item_crc, deterministic=True)


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
