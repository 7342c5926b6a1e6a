"""``SkillsMiddleware``: a library of ``SKILL.md`` skills, listed in the prompt, kept current."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .._core.logs import get_logger
from ..backends import Backend, FileInfo, normalize_path
from ..context import RunContext, RunKey
from ..errors import BackendError, ConfigurationError, FileNotFound
from ..events import SkillSkipped
from ..hooks import AgentMiddleware, ModelHandler
from ..messages import AssistantMessage
from ..models import ModelRequest
from ._skill_parse import MAX_FRONT_MATTER_LINES, Parsed, Skill, parse_skill

__all__ = ["MAX_SKILL_BYTES", "SkillsMiddleware"]

_log = get_logger("deepactors")

MAX_SKILL_BYTES = 10 * 1024 * 1024
"""A ``SKILL.md`` larger than this is skipped without being read."""

SKILLS_HEADER = """\
## Skills
You have a library of skills: folders holding instructions (and sometimes scripts, \
templates or reference files) for particular kinds of work. Only their names and \
purposes are listed here. When a task matches a skill, first read its SKILL.md with \
read_file (ask for enough lines to get all of it), then follow it; paths it mentions \
are relative to its folder. Do not read skills that do not apply.

Available skills:"""

SkillSource = str | tuple[str, str]
"""A folder of skills, or ``(folder, label)``."""


@dataclass(slots=True)
class _Catalog:
    """One run's view of the skill files: parse results by path and version."""

    files: dict[str, tuple[str | None, Parsed]] = field(default_factory=dict)
    signature: tuple[tuple[str, str | None], ...] | None = None
    section: str = ""


class SkillsMiddleware(AgentMiddleware):
    """List the agent's skills in its system prompt; it reads a skill's file when needed.

    ``create_deep_agent(skills=["/skills/"])`` adds it (subagents get ``skills``
    from their spec). Each source is a folder of ``<name>/SKILL.md`` files in the
    agent's backend; later sources override earlier ones by skill name. The
    prompt lists each skill's name, description and path only (progressive
    disclosure): the instructions are read with ``read_file`` when a task needs
    them.

    Before each model call the sources are listed again (one ``glob`` per
    source) and a file is parsed again only when its version changed, so a skill
    the agent writes or edits is listed on its very next call. A skill that
    cannot be used (no or broken YAML front matter, front matter over the parse
    bounds of :mod:`._skill_parse` (size, nesting, aliases, time), a missing
    ``name`` or ``description``, a file over ``max_file_bytes``) is skipped with a
    :class:`~deepactors.events.SkillSkipped` event and a log line naming the file
    and the reason, once per version of the file; the others still load.

    Args:
        sources: Skill folders (or ``(folder, label)`` pairs), lowest priority first.
        backend: Read from this backend instead of the agent's.
        max_file_bytes: Larger ``SKILL.md`` files are skipped unread.
    """

    def __init__(
        self,
        sources: Sequence[SkillSource],
        *,
        backend: Backend | None = None,
        max_file_bytes: int = MAX_SKILL_BYTES,
    ) -> None:
        if isinstance(sources, str) or not sources:
            raise ConfigurationError("skill sources must be a non-empty list of folders")
        folders: list[tuple[str, str]] = []
        for source in sources:
            folder, label = (source, source) if isinstance(source, str) else source
            try:
                folders.append((normalize_path(folder), label))
            except (BackendError, TypeError) as exc:
                raise ConfigurationError(f"invalid skills folder {folder!r}: {exc}") from exc
        self.sources = tuple(folders)
        self.backend = backend
        self.max_file_bytes = max_file_bytes
        self._key: RunKey[_Catalog] = RunKey(f"{self.name}.catalog", _Catalog)

    async def wrap_model_call(
        self, request: ModelRequest, handler: ModelHandler
    ) -> AssistantMessage:
        """Append the skills list (refreshed when a file changed) to the system prompt."""
        run = request.run
        backend = self.backend or (run.backend if run is not None else None)
        if run is None or backend is None:
            raise ConfigurationError("SkillsMiddleware needs the run's backend to find skills in")
        section = await self.section(backend, run)
        if not section:
            return await handler(request)
        prompt = f"{request.system_prompt}\n\n{section}" if request.system_prompt else section
        return await handler(request.replace(system_prompt=prompt))

    async def skills(self, backend: Backend, run: RunContext) -> list[Skill]:
        """The usable skills now, one per name (the last source wins), in listing order."""
        catalog = run.local(self._key)
        by_name: dict[str, Skill] = {}
        seen: set[str] = set()
        for folder, label in self.sources:
            for info in await backend.glob("*/SKILL.md", folder):
                seen.add(info.path)
                parsed = await self._parsed(backend, run, catalog, info, label)
                if parsed.skill is not None:
                    by_name.pop(parsed.skill.name, None)  # an override moves to the end
                    by_name[parsed.skill.name] = parsed.skill
        for gone in set(catalog.files) - seen:
            del catalog.files[gone]
        return list(by_name.values())

    async def section(self, backend: Backend, run: RunContext) -> str:
        """The prompt section listing the skills ("" when there are none)."""
        skills = await self.skills(backend, run)
        catalog = run.local(self._key)
        signature = tuple((path, version) for path, (version, _) in catalog.files.items())
        if signature != catalog.signature:
            catalog.signature = signature
            catalog.section = _render(skills)
        return catalog.section

    async def _parsed(
        self, backend: Backend, run: RunContext, catalog: _Catalog, info: FileInfo, label: str
    ) -> Parsed:
        cached = catalog.files.get(info.path)
        if cached is not None and cached[0] == info.version:
            return cached[1]
        parsed = await self._read(backend, info, label)
        catalog.files[info.path] = (info.version, parsed)
        if parsed.problem is not None:
            _log.warning("skill skipped", file=info.path, reason=parsed.problem, path=run.path)
            if run.emit is not None:
                run.emit(
                    SkillSkipped(
                        path=run.path, run_id=run.run_id, file_path=info.path, reason=parsed.problem
                    )
                )
        for warning in parsed.warnings:
            _log.warning("skill loaded with a warning", file=info.path, warning=warning)
        return parsed

    async def _read(self, backend: Backend, info: FileInfo, label: str) -> Parsed:
        if info.size > self.max_file_bytes:
            return Parsed(
                skill=None,
                problem=f"the file is {info.size} bytes, over the limit of {self.max_file_bytes}",
            )
        try:
            window = await backend.read(info.path, limit=MAX_FRONT_MATTER_LINES + 1)
        except FileNotFound:
            return Parsed(skill=None, problem="the file was deleted while it was being read")
        except BackendError as exc:
            return Parsed(skill=None, problem=f"the file cannot be read: {exc}")
        folder = info.path.rsplit("/", 2)[-2]
        return await parse_skill(window.lines, path=info.path, folder=folder, source=label)


def _render(skills: Sequence[Skill]) -> str:
    if not skills:
        return ""
    lines = [SKILLS_HEADER]
    for skill in skills:
        extra = []
        if skill.license:
            extra.append(f"license: {skill.license}")
        if skill.compatibility:
            extra.append(f"needs: {skill.compatibility}")
        note = f" ({'; '.join(extra)})" if extra else ""
        lines.append(f"- **{skill.name}**: {skill.description}{note} -> `{skill.path}`")
    return "\n".join(lines)
