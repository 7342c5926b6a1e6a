"""Deprecated: the offline demo moved to :mod:`deepactors.assembly.demo`.

Kept for code written against its old path (every public name of the demo
module is here still); warns when imported.
"""

from __future__ import annotations

import warnings

from .assembly.demo import ARCHIVE_PARTS as ARCHIVE_PARTS
from .assembly.demo import CONCLUSION as CONCLUSION
from .assembly.demo import DEMO_QUESTION as DEMO_QUESTION
from .assembly.demo import LIBRARY as LIBRARY
from .assembly.demo import MEMORY as MEMORY
from .assembly.demo import MEMORY_LAST_LINE as MEMORY_LAST_LINE
from .assembly.demo import MEMORY_PATH as MEMORY_PATH
from .assembly.demo import ONE_LINE_ANSWER as ONE_LINE_ANSWER
from .assembly.demo import SKILL as SKILL
from .assembly.demo import SKILL_PATH as SKILL_PATH
from .assembly.demo import TOPICS as TOPICS
from .assembly.demo import ResearchReport as ResearchReport
from .assembly.demo import archivist_model as archivist_model
from .assembly.demo import build_demo_agent as build_demo_agent
from .assembly.demo import print_event as print_event
from .assembly.demo import read_archive as read_archive
from .assembly.demo import research_model as research_model
from .assembly.demo import researcher_model as researcher_model
from .assembly.demo import run_demo as run_demo
from .assembly.demo import search_library as search_library
from .assembly.demo import seed_demo_files as seed_demo_files
from .assembly.demo import topics_in as topics_in

warnings.warn(
    "deepactors.demo is deprecated: import from deepactors.assembly.demo",
    DeprecationWarning,
    stacklevel=2,
)
