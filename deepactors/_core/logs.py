"""How deepactors logs: through the standard ``logging`` module, quiet by default.

Every logger of the package comes from :func:`get_logger`: a structlog logger
(events with key-value context) that hands each event to ``logging``, under the
``deepactors`` logger and its children. So the application's logging
configuration decides what is shown, as for any library. With none, Python's
last-resort handler prints warnings and errors on stderr and nothing else: no
debug or info line, and never anything on stdout. Like httpx, deepactors adds no
handler, not even a ``NullHandler``: its warnings (a tool left running past a
deadline, a skill file skipped) say that something needs fixing, so they reach
stderr unless the application says otherwise.

To see the debug lines (``create_deep_agent(debug=True)``, summarization)::

    logging.basicConfig()
    logging.getLogger("deepactors").setLevel(logging.DEBUG)

A plain formatter shows an event as one line, ``context summarized path=main
dropped=12``; structlog's :class:`~structlog.stdlib.ProcessorFormatter` gets the
event dict itself. :func:`configure_logging` is what the ``deepactors`` command
and ``deepactors serve`` install (never an import): one stderr handler writing
console lines or JSON lines.
"""

from __future__ import annotations

import logging
import logging.config
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from structlog.typing import EventDict, Processor

__all__ = [
    "LOG_FORMATS",
    "LOG_LEVELS",
    "StderrHandler",
    "configure_logging",
    "formatter",
    "get_logger",
    "logging_config",
]

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
"""The levels ``--log-level`` accepts."""

LOG_FORMATS = ("console", "json")
"""The formats ``--log-format`` accepts."""

# What the stdlib logging methods take as keywords rather than as event fields.
_LOG_KWARGS = ("exc_info", "stack_info", "stacklevel")
# Not key=value pairs of the line: the event is its text, exc_info is logging's.
_NOT_SHOWN = frozenset({"event", "exc_info"})


def get_logger(name: str = "deepactors") -> Logger:
    """A logger of key-value events that go to the stdlib logger ``name``.

    The events have structlog's shape (an event dict) and structlog's
    ``ProcessorFormatter`` renders them, but structlog's global configuration
    (whose default prints every level on stdout) never applies to them.

    Args:
        name: The stdlib logger: ``deepactors`` or a child of it.

    Returns:
        A logger to call as ``log.warning("event", key=value)``.
    """
    return Logger(logging.getLogger(name))


class Logger:
    """Key-value events handed to a stdlib logger, as structlog's stdlib ``BoundLogger``
    with deepactors' processors would hand them, without importing structlog.

    structlog is imported where an event is rendered (:func:`formatter`) or
    captured (``structlog.testing.capture_logs``), not by every process that
    imports deepactors: its import pulls in rich and pygments when they are
    installed (the CLI's live view needs rich), a tenth of ``import deepactors``.
    A debug event nobody listens to stops at the level check: no record is built.

    Args:
        logger: The stdlib logger the events go to.
    """

    __slots__ = ("_logger",)

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger

    def debug(self, event: str, **kw: object) -> None:
        """Log ``event`` with ``kw`` at DEBUG."""
        self._emit("debug", logging.DEBUG, event, kw)

    def info(self, event: str, **kw: object) -> None:
        """Log ``event`` with ``kw`` at INFO."""
        self._emit("info", logging.INFO, event, kw)

    def warning(self, event: str, **kw: object) -> None:
        """Log ``event`` with ``kw`` at WARNING."""
        self._emit("warning", logging.WARNING, event, kw)

    def error(self, event: str, **kw: object) -> None:
        """Log ``event`` with ``kw`` at ERROR."""
        self._emit("error", logging.ERROR, event, kw)

    def exception(self, event: str, **kw: object) -> None:
        """Log ``event`` with ``kw`` at ERROR, with the exception being handled."""
        kw.setdefault("exc_info", True)
        self._emit("error", logging.ERROR, event, kw)

    def critical(self, event: str, **kw: object) -> None:
        """Log ``event`` with ``kw`` at CRITICAL."""
        self._emit("critical", logging.CRITICAL, event, kw)

    def _emit(self, method_name: str, level: int, event: str, kw: dict[str, object]) -> None:
        event_dict: dict[str, Any] = {**kw, "event": event}
        # capture_logs() can only be on where structlog was imported.
        if (structlog := sys.modules.get("structlog")) is not None and _captured(
            structlog, self._logger, method_name, event_dict
        ):
            return
        if not self._logger.isEnabledFor(level):
            return
        args, kwargs = _to_record(self._logger, method_name, event_dict)
        kwargs.setdefault("stacklevel", 3)  # the record names the caller of warning() etc.
        self._logger.log(level, *args, **kwargs)


class _Event(dict[str, Any]):
    """An event dict that reads as one line, for a formatter that knows no structlog."""

    __slots__ = ()

    def __str__(self) -> str:
        text = str(self.get("event", ""))
        pairs = " ".join(f"{k}={_value(v)}" for k, v in self.items() if k not in _NOT_SHOWN)
        return f"{text} {pairs}" if pairs else text


def _value(value: object) -> str:
    # Quoted only when a bare value would be ambiguous in a key=value line.
    if isinstance(value, str) and value and not any(c.isspace() or c == "=" for c in value):
        return value
    return repr(value)


def _captured(
    structlog: ModuleType, logger: logging.Logger, method_name: str, event_dict: dict[str, Any]
) -> bool:
    """Whether a ``structlog.testing.capture_logs()`` took the event (then not logged).

    It swaps a ``LogCapture`` into structlog's global processors; honoured at
    every level, so that tests capturing deepactors' events keep seeing them.
    """
    capture = structlog.testing.LogCapture
    for processor in structlog.get_config()["processors"]:
        if isinstance(processor, capture):
            try:
                processor(logger, method_name, event_dict)
            except structlog.DropEvent:
                return True
    return False


def _to_record(
    logger: Any, method_name: str, event_dict: EventDict
) -> tuple[tuple[_Event], dict[str, Any]]:
    kwargs = {key: event_dict.pop(key) for key in _LOG_KWARGS if key in event_dict}
    if kwargs.get("exc_info"):
        # Resolved now, while the exception is being handled, and kept in the event
        # too: ProcessorFormatter renders an event's exc_info, not its record's.
        kwargs["exc_info"] = event_dict["exc_info"] = _exc_info(kwargs["exc_info"])
    # _logger and _name are how ProcessorFormatter tells a structlog event (whose
    # msg is the event dict) from a foreign record: as its wrap_for_formatter does.
    extra = {"_logger": logger, "_name": method_name}
    return (_Event(event_dict),), {"extra": extra, **kwargs}


def _exc_info(value: object) -> object:
    if isinstance(value, BaseException):
        return (type(value), value, value.__traceback__)
    if isinstance(value, tuple):
        return value
    return sys.exc_info()


class StderrHandler(logging.StreamHandler[TextIO]):
    """A stream handler writing to whatever ``sys.stderr`` is when it writes.

    Not the object it was at configuration: the live view of ``deepactors run``
    replaces ``sys.stderr`` while it draws, so that log lines print above it.
    """

    def __init__(self, level: int = logging.NOTSET) -> None:
        # StreamHandler.__init__ would assign the stream this class reads live.
        logging.Handler.__init__(self, level)

    # Read-only on purpose (as logging's own last-resort handler): there is no stream to set.
    @property
    def stream(self) -> TextIO:  # type: ignore[override]
        """The current ``sys.stderr``."""
        return sys.stderr


def formatter(log_format: str = "console") -> logging.Formatter:
    """The formatter :func:`configure_logging` installs, for deepactors' and any other records.

    Args:
        log_format: ``console`` (aligned, colored on a terminal) or ``json`` (one
            object a line, with ``timestamp``, ``level``, ``logger``, ``event``).

    Returns:
        A structlog ``ProcessorFormatter``.
    """
    import structlog  # here, where events are rendered: see Logger

    common: list[Processor] = [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
    ]
    final: list[Processor]
    if log_format == "json":
        final = [
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(default=repr),
        ]
    else:
        final = [
            structlog.processors.TimeStamper(fmt="%Y-%m-%d %H:%M:%S", utc=False),
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            # A plain traceback: rich's shows local variables, secrets included.
            structlog.dev.ConsoleRenderer(
                colors=sys.stderr.isatty(), exception_formatter=structlog.dev.plain_traceback
            ),
        ]
    return structlog.stdlib.ProcessorFormatter(processors=[*common, *final])


def logging_config(level: str = "warning", log_format: str = "console") -> dict[str, Any]:
    """The ``logging.config.dictConfig`` of :func:`configure_logging`.

    A dict, so that a server's worker processes can apply it too (uvicorn's
    ``log_config``, hypercorn's ``logconfig_dict``).

    Args:
        level: One of :data:`LOG_LEVELS`: the root logger's level.
        log_format: One of :data:`LOG_FORMATS`.

    Returns:
        The configuration: one stderr handler on the root logger.

    Raises:
        ConfigurationError: An unknown level or format.
    """
    if level not in LOG_LEVELS:
        raise ConfigurationError(f"log level must be one of {', '.join(LOG_LEVELS)}, not {level!r}")
    if log_format not in LOG_FORMATS:
        raise ConfigurationError(
            f"log format must be one of {', '.join(LOG_FORMATS)}, not {log_format!r}"
        )
    return {
        "version": 1,
        # Loggers made before (uvicorn's, the agent module's) keep working.
        "disable_existing_loggers": False,
        "formatters": {
            "deepactors": {"()": f"{__name__}.formatter", "log_format": log_format},
        },
        "handlers": {
            "stderr": {"class": f"{__name__}.StderrHandler", "formatter": "deepactors"},
        },
        "root": {"level": level.upper(), "handlers": ["stderr"]},
    }


def configure_logging(level: str = "warning", log_format: str = "console") -> None:
    """Log everything at ``level`` and above to stderr, as console or JSON lines.

    For a process that is a deepactors command (``deepactors run``, ``serve``):
    it replaces the root logger's handlers. A library user configures logging
    their own way instead.

    Args:
        level: One of :data:`LOG_LEVELS`.
        log_format: One of :data:`LOG_FORMATS`.

    Raises:
        ConfigurationError: An unknown level or format.
    """
    logging.config.dictConfig(logging_config(level, log_format))
