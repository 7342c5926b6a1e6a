"""The exceptions deepactors raises, in one small tree.

Where a builtin means the same thing, the error subclasses it too, so
``except FileNotFoundError`` keeps working for code that does not know us::

    DeepActorsError
    ├── InputError (ValueError)            invalid input to a run, raised before any work
    ├── ConfigurationError (ValueError)    a bad argument to create_deep_agent & co.
    ├── StepLimitExceeded (RuntimeError)   the agent loop ran more model turns than allowed
    ├── CallLimitExceeded (RuntimeError)   a call limit middleware with exit_behavior="error"
    ├── BudgetExceeded (RuntimeError)      a model call the run's budget cannot cover: not made
    ├── RunCancelled                       the run was cancelled through its handle
    ├── RuntimeClosed (RuntimeError)       a run was started on a runtime that has closed
    ├── InterruptNeedsThread (RuntimeError)  a stateless run stopped for a human: run it on a thread
    ├── UnsupportedLoop (RuntimeError)     the running async library is not asyncio or trio
    ├── ToolError                          raise inside a tool: the model sees the message
    │   ├── ToolArgumentsError (ValueError)     the model's arguments do not fit the tool
    │   └── TooManyStrayThreads (RuntimeError)  too many sync calls left running at a deadline
    ├── ModelError                         a model could not answer
    │   ├── StructuredOutputError          the answer kept failing its response_format
    │   ├── ModelAPIError                  the provider rejected or failed a request
    │   │   ├── RateLimitError             429: retryable
    │   │   ├── OverloadedError            529 / 5xx: retryable
    │   │   ├── ModelConnectionError       the provider could not be reached: retryable
    │   │   └── ContextWindowExceeded      the prompt does not fit the model's window
    │   └── ScriptExhausted                a ScriptedModel ran out of answers
    ├── BackendError                       a file backend refused or failed an operation
    │   ├── FileNotFound (FileNotFoundError)
    │   ├── IsADirectory (IsADirectoryError)
    │   ├── NotADirectory (NotADirectoryError)
    │   ├── InvalidPath (ValueError)       malformed path: "..", "~", a host path, NUL, ...
    │   ├── InvalidPattern (ValueError)    a grep regular expression that does not compile
    │   ├── PathOutsideRoot (PermissionError)  resolves outside the backend's root
    │   ├── PermissionDenied (PermissionError) refused by the agent's file permissions
    │   ├── FileTooLarge                   over a backend's size limit
    │   ├── BinaryFile                     not text; the file tools cannot show it
    │   ├── SpecialFile                    a FIFO, socket or device: not a regular file
    │   ├── EditError                      the edit's old string is missing or not unique
    │   ├── ReadBeforeWrite                changing a file not read since it last changed
    │   ├── UnsupportedOperation (NotImplementedError)  e.g. execute on a file-only backend
    │   └── SandboxError                   a sandbox refused or could not run a command
    │       └── SandboxUnavailable         the sandbox cannot be set up here (never run on the host)
    ├── ThreadBusy                         another run holds the thread (and we may not wait)
    └── PersistenceError                   a checkpoint or store database failed
        ├── DatabaseUnavailable            it cannot be reached now (down, restarting): try again
        ├── CheckpointError                checkpoints could not be read or written
        │   ├── CheckpointUnavailable (DatabaseUnavailable)
        │   ├── CheckpointCorrupt          the file or a record is damaged or of another schema
        │   │   └── CheckpointSchemaMismatch  written with another schema version
        │   ├── CheckpointFileLost         the file was deleted or replaced while in use
        │   └── ThreadLeaseLost            the run's lease lapsed: its writes are refused
        └── StoreError                     the store could not be read or written
            ├── StoreUnavailable (DatabaseUnavailable)
            ├── StoreCorrupt               the file or an item is damaged or of another schema
            └── StoreFileLost              the file was deleted or replaced while in use

And one warning, outside that tree::

    ThreadNotSavedWarning (UserWarning)    a thread_id is given, but nothing keeps the thread

anyio's cancellation exception is never caught and turned into one of these.
"""

from __future__ import annotations

__all__ = [
    "BackendError",
    "BinaryFile",
    "BudgetExceeded",
    "CallLimitExceeded",
    "CheckpointCorrupt",
    "CheckpointError",
    "CheckpointFileLost",
    "CheckpointSchemaMismatch",
    "CheckpointUnavailable",
    "ConfigurationError",
    "ContextWindowExceeded",
    "DatabaseUnavailable",
    "DeepActorsError",
    "EditError",
    "FileNotFound",
    "FileTooLarge",
    "InputError",
    "InterruptNeedsThread",
    "InvalidPath",
    "InvalidPattern",
    "IsADirectory",
    "ModelAPIError",
    "ModelConnectionError",
    "ModelError",
    "NotADirectory",
    "OverloadedError",
    "PathOutsideRoot",
    "PermissionDenied",
    "PersistenceError",
    "RateLimitError",
    "ReadBeforeWrite",
    "RunCancelled",
    "RuntimeClosed",
    "SandboxError",
    "SandboxUnavailable",
    "ScriptExhausted",
    "SpecialFile",
    "StepLimitExceeded",
    "StoreCorrupt",
    "StoreError",
    "StoreFileLost",
    "StoreUnavailable",
    "StructuredOutputError",
    "ThreadBusy",
    "ThreadLeaseLost",
    "ThreadNotSavedWarning",
    "TooManyStrayThreads",
    "ToolArgumentsError",
    "ToolError",
    "UnsupportedLoop",
    "UnsupportedOperation",
]


class DeepActorsError(Exception):
    """Base class of every error deepactors raises on purpose."""

    def __reduce__(self) -> tuple[object, ...]:
        # Many take keyword-only details (``location``, ``thread_id``, ...), which
        # Exception's own reduce drops: copied or pickled (into a process pool,
        # by copy.copy), they are rebuilt from their message and attributes.
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(
    cls: type[DeepActorsError], args: tuple[object, ...], state: dict[str, object]
) -> DeepActorsError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class InputError(DeepActorsError, ValueError):
    """The input of a run is invalid. Raised before any model call."""


class ConfigurationError(DeepActorsError, ValueError):
    """An agent, middleware or backend was configured with a bad argument."""


class StepLimitExceeded(DeepActorsError, RuntimeError):
    """The agent loop made more model calls than its ``max_steps`` allows."""


class CallLimitExceeded(DeepActorsError, RuntimeError):
    """A run made more model or tool calls than a call limit middleware allows.

    Raised only with ``exit_behavior="error"``; ``"end"`` ends the run with a
    final message instead.
    """


class BudgetExceeded(DeepActorsError, RuntimeError):
    """A model call was not made: the run's :class:`~deepactors.Budget` cannot cover it.

    A subagent that meets it fails (its parent reads why); the top-level run
    catches it and ends with a final message, its ``result["budget"]`` showing
    what was spent.

    Attributes:
        resource: ``model_calls``, ``input_tokens``, ``output_tokens``, ``tool_calls``
            or ``usd``.
        limit: The budget's limit for it (dollars for ``usd``).
        spent: How much of it was spent when the call was refused.
    """

    def __init__(self, message: str, *, resource: str, limit: float, spent: float) -> None:
        super().__init__(message)
        self.resource = resource
        self.limit = limit
        self.spent = spent


class RunCancelled(DeepActorsError):
    """The run was cancelled through its handle (``RunHandle.cancel()``)."""


class RuntimeClosed(DeepActorsError, RuntimeError):
    """A run was started on a runtime that is closing or closed."""


class InterruptNeedsThread(DeepActorsError, RuntimeError):
    """A stateless run (a server's, thrown away when it ends) stopped for a human's
    decision: nothing is kept to continue from, so it must run on a thread."""


class UnsupportedLoop(DeepActorsError, RuntimeError):
    """The running async library is neither asyncio nor trio."""


class ToolError(DeepActorsError):
    """Raise inside a tool to hand the model an error message.

    Any exception a tool raises becomes an error ``ToolMessage``; raising this one
    says the message is meant for the model as is, so no type name is prefixed.
    """


class ToolArgumentsError(ToolError, ValueError):
    """The model's arguments do not fit the tool's parameters."""


class TooManyStrayThreads(ToolError, RuntimeError):
    """Too many earlier calls were left running at a deadline; no new thread is started."""


class ModelError(DeepActorsError):
    """A model could not produce an answer."""


class StructuredOutputError(ModelError):
    """The model's answer kept failing its ``response_format`` past the retry limit.

    Attributes:
        last_error: What was wrong with the last answer.
    """

    def __init__(self, message: str, *, last_error: str) -> None:
        super().__init__(message)
        self.last_error = last_error


class ModelAPIError(ModelError):
    """A model provider rejected or failed a request.

    Attributes:
        status_code: The HTTP status, when there was one.
        retry_after: Seconds the server asked us to wait, when it said.
    """

    def __init__(
        self, message: str, *, status_code: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retry_after = retry_after


class RateLimitError(ModelAPIError):
    """The provider said "too many requests" (HTTP 429). Worth retrying later."""


class OverloadedError(ModelAPIError):
    """The provider is overloaded or failed on its side (529, 5xx). Worth retrying."""


class ModelConnectionError(ModelAPIError):
    """The provider could not be reached (refused, reset, timed out). Worth retrying."""


class ContextWindowExceeded(ModelAPIError):
    """The request does not fit in the model's context window."""


class ScriptExhausted(ModelError):
    """A :class:`~deepactors.models.ScriptedModel` was called after its last answer."""


class BackendError(DeepActorsError):
    """A file backend refused or failed an operation.

    Attributes:
        path: The agent-visible path the operation was about, when there is one.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class FileNotFound(BackendError, FileNotFoundError):
    """No file or folder at that path."""


class IsADirectory(BackendError, IsADirectoryError):
    """The path is a folder where a file was expected."""


class NotADirectory(BackendError, NotADirectoryError):
    """The path is a file where a folder was expected."""


class InvalidPath(BackendError, ValueError):
    """The path is malformed: ``..`` components, ``~``, a host path, NUL bytes, ..."""


class InvalidPattern(BackendError, ValueError):
    """A search pattern (a grep regular expression) does not compile."""


class PathOutsideRoot(BackendError, PermissionError):
    """The path (or a symlink on it) resolves outside the backend's root."""


class PermissionDenied(BackendError, PermissionError):
    """The agent's file permissions (``FilesystemPermission`` rules) refuse the operation."""


class FileTooLarge(BackendError):
    """The file or the content is over the backend's size limit."""


class BinaryFile(BackendError):
    """The file is not text, so it cannot be read or edited as lines."""


class SpecialFile(BackendError):
    """The path is a FIFO, socket or device, not a regular file: it is never read.

    Opening a FIFO to read would wait for a writer, possibly forever.
    """


class EditError(BackendError):
    """An edit's ``old_string`` was not found, or is not unique without ``replace_all``."""


class ReadBeforeWrite(BackendError):
    """A file is changed by an agent that has not read it since it last changed."""


class UnsupportedOperation(BackendError, NotImplementedError):
    """The backend cannot do this operation (for example ``execute``)."""


class SandboxError(BackendError):
    """A sandbox refused or failed to run a command (its workspace, its limits)."""


class SandboxUnavailable(SandboxError):
    """The sandbox cannot be set up on this machine, and says why.

    For example bubblewrap is not installed, or the kernel does not let this user
    create namespaces. A sandbox never falls back to running commands on the host.
    """


class ThreadBusy(DeepActorsError):
    """Another run holds the thread, and this checkpointer refuses to wait for it.

    Raised only by a checkpointer made with ``when_busy="raise"``; by default a run
    waits for its turn (and the wait counts against its ``timeout``).

    Attributes:
        thread_id: The thread.
        holder: Who holds it, as far as the checkpointer knows (``"pid 4242 on
            host-a"``, ``"another run in this process"``).
    """

    def __init__(self, message: str, *, thread_id: str, holder: str) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.holder = holder


class PersistenceError(DeepActorsError):
    """A checkpoint or store database cannot be read or written.

    The message names the file (and the thread and record, or the item, when one
    is at fault), never the stored data itself.
    """


class DatabaseUnavailable(PersistenceError):
    """The database cannot be reached now: it is down, restarting, or out of connections.

    Nothing is wrong with what is stored or asked; the same request may succeed
    once the database is back (the server answers it with 503 and
    ``Retry-After``). A failure while connected (a refused or cut-off statement)
    is not this: its write may or may not have been committed.

    Attributes:
        location: The database, without credentials (``postgresql://host/db``).
        since: When it was first found unreachable (``time.time()``).
    """

    def __init__(self, message: str, *, location: str, since: float) -> None:
        super().__init__(message)
        self.location = location
        self.since = since


class CheckpointError(PersistenceError):
    """Checkpoints cannot be read or written."""


class CheckpointUnavailable(CheckpointError, DatabaseUnavailable):
    """The checkpointer's database cannot be reached now (see :class:`DatabaseUnavailable`)."""


class CheckpointCorrupt(CheckpointError):
    """A checkpoint file or record is damaged, or was written with another schema."""


class CheckpointSchemaMismatch(CheckpointCorrupt):
    """The file holds tables of another schema version than this deepactors uses.

    Nothing is wrong with the bytes: it was written by another version. The
    message names the file and both versions.
    """


class CheckpointFileLost(CheckpointError):
    """The checkpoint file was deleted, or replaced by another file, while in use.

    A deleted file stays writable through the connection that has it open, and
    a file renamed over it leaves the connection on the old one: what is written
    then is lost when the connection closes. So once the file at the path is not
    the one first opened, every operation fails with this error naming the path,
    the operation that noticed included (its write may have gone to the lost
    file, and is not reported as stored).
    """


class ThreadLeaseLost(CheckpointError):
    """A run's lease on its thread lapsed and another run took it.

    The lease is renewed while the run is alive; it lapses only when the run's
    event loop was stalled for longer than the lease lasts. Once another run has
    the thread, this run's writes are refused, so the two never interleave.
    """


class StoreError(PersistenceError):
    """The store's database cannot be read or written."""


class StoreUnavailable(StoreError, DatabaseUnavailable):
    """The store's database cannot be reached now (see :class:`DatabaseUnavailable`)."""


class StoreCorrupt(StoreError):
    """A store file or item is damaged, or was written with another schema."""


class StoreFileLost(StoreError):
    """The store's file was deleted, or replaced by another file, while in use.

    See :class:`CheckpointFileLost`: the same check, for the store.
    """


class ThreadNotSavedWarning(UserWarning):
    """A ``thread_id`` was given, but nothing will remember the thread after the run."""
