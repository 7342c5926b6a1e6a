"""A ``response_format`` schema, resolved once: its JSON schema, and how to check a value.

Types (a pydantic model class, a dataclass, a TypedDict) go through pydantic's
``TypeAdapter``: their JSON schema, validation into an instance, and JSON out and
back for checkpoints. A JSON schema dict is checked with ``jsonschema`` and its
values stay plain JSON (``jsonschema`` is imported only then: most agents never
need it, and importing it, with ``referencing``, cost every process
that imports the package, ``deepactors serve`` included).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from .._core.jsonvalue import JSONObject
from ..errors import ConfigurationError

if TYPE_CHECKING:
    import jsonschema

__all__ = ["OutputSchema"]

_MAX_LISTED = 5  # validation errors quoted back to the model
_TOOL_NAME = re.compile(r"[^a-zA-Z0-9_-]")


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputSchema:
    """A schema for a structured answer.

    Attributes:
        name: A name for it (the class name, or the JSON schema's ``title``), fit
            to be a tool name.
        description: What it is, from the class docstring or the schema.
        json_schema: Its JSON schema (always of an object).
    """

    name: str
    description: str | None
    json_schema: JSONObject
    adapter: TypeAdapter[Any] | None = None
    validator: jsonschema.protocols.Validator | None = None

    @classmethod
    def of(cls, schema: object) -> OutputSchema:
        """Resolve a pydantic model class, dataclass, TypedDict or JSON schema dict.

        Raises:
            ConfigurationError: Anything else, a broken JSON schema, or a schema
                whose values are not JSON objects.
        """
        if isinstance(schema, Mapping):
            return cls._of_json_schema(dict(schema))
        if not isinstance(schema, type):
            raise ConfigurationError(
                "response_format must be a pydantic model class, a dataclass, a TypedDict or "
                f"a JSON schema dict, not {schema!r}"
            )
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(schema)
            json_schema = adapter.json_schema()
        except Exception as exc:  # pydantic's schema errors have no common base
            raise ConfigurationError(
                f"response_format {schema.__name__} has no JSON schema: {exc}"
            ) from exc
        _require_object(json_schema, schema.__name__)
        return cls(
            name=_tool_name(schema.__name__),
            description=json_schema.get("description"),
            json_schema=json_schema,
            adapter=adapter,
        )

    @classmethod
    def _of_json_schema(cls, schema: JSONObject) -> OutputSchema:
        import jsonschema

        validator_type = jsonschema.validators.validator_for(
            schema, default=jsonschema.Draft202012Validator
        )
        try:
            validator_type.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ConfigurationError(
                f"response_format is not a valid JSON schema: {exc.message}"
            ) from None
        title = schema.get("title")
        name = title if isinstance(title, str) and title else "response"
        _require_object(schema, name)
        description = schema.get("description")
        return cls(
            name=_tool_name(name),
            description=description if isinstance(description, str) else None,
            json_schema=schema,
            validator=validator_type(schema),
        )

    def validate(self, data: Any) -> Any:
        """``data`` checked against the schema (an instance, for a type).

        Raises:
            ValueError: What does not fit, in words the model can act on.
        """
        if self.adapter is not None:
            try:
                return self.adapter.validate_python(data)
            except ValidationError as exc:
                problems = [
                    f"{'.'.join(str(p) for p in e['loc']) or '(the whole answer)'}: {e['msg']}"
                    for e in exc.errors()
                ]
                raise ValueError(_listing(problems)) from None
        assert self.validator is not None
        errors = sorted(self.validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        if errors:
            problems = [
                f"{'.'.join(str(p) for p in e.absolute_path) or '(the whole answer)'}: {e.message}"
                for e in errors
            ]
            raise ValueError(_listing(problems))
        return data

    def encode(self, value: object) -> object:
        """A value as JSON data (for checkpoints and a subagent's answer)."""
        if value is None or self.adapter is None:
            return value
        return self.adapter.dump_python(value, mode="json")

    def decode(self, data: object) -> object:
        """The inverse of :meth:`encode`."""
        if data is None or self.adapter is None:
            return data
        return self.adapter.validate_python(data)


def _require_object(schema: Mapping[str, object], name: str) -> None:
    if schema.get("type") != "object":
        raise ConfigurationError(
            f"response_format {name} must describe a JSON object (a model class, dataclass, "
            f"TypedDict, or a schema with type 'object'), not type {schema.get('type')!r}"
        )


def _tool_name(name: str) -> str:
    return _TOOL_NAME.sub("_", name)[:64] or "response"


def _listing(problems: list[str]) -> str:
    shown = "; ".join(problems[:_MAX_LISTED])
    more = len(problems) - _MAX_LISTED
    return shown + (f" (and {more} more)" if more > 0 else "")
