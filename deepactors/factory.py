"""Deprecated: ``create_deep_agent`` and ``DEFAULT_PROMPT`` moved to :mod:`deepactors.assembly`.

``from deepactors import create_deep_agent`` is the everyday import; this module
is kept for code written against its old path and warns when imported.
"""

from __future__ import annotations

import warnings

from .assembly import DEFAULT_PROMPT as DEFAULT_PROMPT
from .assembly import create_deep_agent as create_deep_agent

warnings.warn(
    "deepactors.factory is deprecated: import create_deep_agent from deepactors "
    "(or deepactors.assembly), DEFAULT_PROMPT from deepactors.assembly",
    DeprecationWarning,
    stacklevel=2,
)
