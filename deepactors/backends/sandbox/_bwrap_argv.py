"""The bubblewrap command line of a sandbox: what is visible, what is shared, what is limited.

Built once per :class:`~deepactors.backends.BubblewrapSandbox` (in a worker
thread: it looks at the host's folders), then completed per command with the
workspace and the command itself.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from deepactors.errors import ConfigurationError

from ._sandbox import WORKSPACE, SandboxLimits

__all__ = ["BwrapConfig", "bwrap_prefix", "limit_args"]

_BASE_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
# The top-level folders of a merged-/usr system are symlinks into /usr; on an older
# layout they are folders of their own, bound read-only like /usr.
_ROOT_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# What programs read from /etc to start at all (the dynamic linker's cache, the
# Debian alternatives that /usr/bin/awk and friends point through, the time zone).
# Never passwd, shadow, or anything holding secrets.
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime")
# Only with the network: name resolution and the CA certificates for TLS.
_ETC_NET = ("resolv.conf", "hosts", "nsswitch.conf", "host.conf", "ssl", "ca-certificates")


@dataclass(frozen=True, slots=True, kw_only=True)
class BwrapConfig:
    """What a sandbox shows and allows, as given by the user.

    Attributes:
        python: An interpreter (path or name on ``PATH``) whose installation is
            made visible read-only and whose ``bin`` folder leads ``PATH``; None
            for none beyond what ``/usr`` holds.
        tools: Programs (names on ``PATH`` or paths) made visible read-only.
        paths: Further host paths made visible read-only, at the same place.
        network: Share the host's network (otherwise the sandbox has only its
            own loopback, reaching nothing).
        env: Variables the commands get, on top of ``PATH``, ``HOME``, ``LANG``
            and ``TMPDIR``; nothing else of the server's environment is passed.
        limits: The resource limits of each command.
    """

    python: str | None = None
    tools: Sequence[str] = ()
    paths: Sequence[str] = ()
    network: bool = False
    env: Mapping[str, str] | None = None
    limits: SandboxLimits = field(default_factory=SandboxLimits)


def _covered(path: str, shown: Sequence[str]) -> bool:
    return any(path == s or path.startswith(s.rstrip("/") + "/") for s in shown)


# The sandbox's own mounts: a listed path may not cover them (``/`` would bring the
# host's /proc with it), nor reach into the kernel's interfaces or the workspace
# (one under /tmp is fine: it is bound into the sandbox's own /tmp).
_OWN = ("/proc", "/dev", "/tmp", "/sys", WORKSPACE)
_CLOSED = ("/proc", "/dev", "/sys", WORKSPACE)


def _check_visible(path: str) -> None:
    for own in _OWN:
        if _covered(own, [path]) or (own in _CLOSED and _covered(path, [own])):
            raise ConfigurationError(
                f"BubblewrapSandbox: {path!r} cannot be made visible: it would cover or "
                f"reach into the sandbox's own {own}"
            )


def _python_prefix(python: str) -> tuple[str, str]:
    """The installation folder of an interpreter, and its ``bin`` folder."""
    found = python if os.path.isabs(python) else shutil.which(python)
    if found is None or not os.path.exists(found):
        raise ConfigurationError(f"BubblewrapSandbox: no Python interpreter {python!r}")
    real = os.path.realpath(found)
    bindir = os.path.dirname(real)
    return os.path.dirname(bindir), bindir


def _tool_path(tool: str) -> str:
    found = tool if os.path.isabs(tool) else shutil.which(tool)
    if found is None or not os.path.exists(found):
        raise ConfigurationError(f"BubblewrapSandbox: no program {tool!r} on this machine")
    return os.path.realpath(found)


def bwrap_prefix(config: BwrapConfig) -> tuple[list[str], str]:
    """The bubblewrap options up to the workspace, and the commands' ``PATH``.

    Looks at the host's folders (``stat``, ``readlink``): call it in a worker thread.

    Raises:
        ConfigurationError: A Python, tool or path that does not exist.
    """
    args = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--disable-userns",  # no nested namespaces: less kernel surface inside
        "--die-with-parent",
        "--new-session",  # no terminal: TIOCSTI cannot push keys into the host's
        "--cap-drop",
        "ALL",
        "--hostname",
        "sandbox",
        "--clearenv",
    ]
    if not config.network:
        args.append("--unshare-net")
    shown = ["/usr"]
    args += ["--ro-bind", "/usr", "/usr"]
    for name in _ROOT_LINKS:
        host = "/" + name
        if os.path.islink(host):
            args += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            args += ["--ro-bind", host, host]
            shown.append(host)
    for name in (*_ETC, *(_ETC_NET if config.network else ())):
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    limits = config.limits
    # Before the paths the user lists: a later mount on /tmp would hide one under it.
    args += ["--proc", "/proc", "--dev", "/dev"]
    if limits.tmp_bytes is not None:
        args += ["--size", str(limits.tmp_bytes)]
    args += ["--tmpfs", "/tmp"]
    path = _BASE_PATH
    extra: list[str] = []
    if config.python is not None:
        prefix, bindir = _python_prefix(config.python)
        extra.append(prefix)
        path = f"{bindir}:{path}"
    extra += [_tool_path(t) for t in config.tools]
    for p in config.paths:
        if not os.path.isabs(p) or not os.path.exists(p):
            raise ConfigurationError(f"BubblewrapSandbox: paths must exist and be absolute: {p!r}")
        extra.append(os.path.realpath(p))
    for p in extra:
        _check_visible(p)
        if not _covered(p, shown):
            args += ["--ro-bind", p, p]
            shown.append(p)
    env = {
        "PATH": path,
        "HOME": WORKSPACE,
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        **(config.env or {}),
    }
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args, path


def limit_args(limits: SandboxLimits) -> list[str]:
    """``prlimit`` options setting the soft and hard limits (the command cannot raise them)."""
    out = ["--core=0"]
    for option, value in (
        ("cpu", limits.cpu_seconds),
        ("as", limits.memory_bytes),
        ("nproc", limits.processes),
        ("fsize", limits.file_bytes),
        ("nofile", limits.open_files),
    ):
        if value is not None:
            out.append(f"--{option}={value}")
    return out
