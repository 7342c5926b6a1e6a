"""Public names show their public module, as trio's and httpx's do.

A class defined in ``deepactors.middleware._structured`` and exported by
``deepactors.middleware`` would otherwise read
``deepactors.middleware._structured.ToolStrategy`` in every repr and traceback:
a path users cannot (should not) import. :func:`publish`, called at the bottom of
each public package's ``__init__``, gives it the package's name instead. Pickle
finds the object there too, since the package exports it.

Changing ``__module__`` has one cost: ``typing.get_type_hints`` (and pydantic,
for a dataclass used as a field type) resolves a class's string annotations
(``from __future__ import annotations``) in ``sys.modules[cls.__module__]``,
which is now the package, where ``Mapping`` or a private helper type is not
defined. So each string annotation is first pinned to the module that wrote it,
as a ``ForwardRef`` with that module, the way ``TypedDict`` pins its own: the
hints resolve exactly as before.

:class:`NoPublicConstructor` is trio's metaclass for handles users receive but
must not build (``Runtime``, ``RunHandle``, ``EventStream``, thread handles):
calling the class raises ``TypeError``; the package makes one with
``Cls._create(...)``.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from types import FunctionType
from typing import ForwardRef, NoReturn, TypeVar

__all__ = ["NoPublicConstructor", "is_private", "publish"]

T = TypeVar("T")


class NoPublicConstructor(type):
    """A metaclass for classes only the package instantiates (trio's ``_util``).

    ``Cls(...)`` raises ``TypeError`` naming where to get one; the package
    calls ``Cls._create(...)``. Put ``@typing.final`` on such a class too: a
    subclass would be as constructible as its base is not.
    """

    def __call__(cls, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError(
            f"{cls.__module__}.{cls.__qualname__} has no public constructor"
            + (f": {hint}" if (hint := getattr(cls, "_obtain", None)) else "")
        )

    def _create(cls: type[T], *args: object, **kwargs: object) -> T:
        made: T = type.__call__(cls, *args, **kwargs)
        return made


def is_private(module_name: str) -> bool:
    """Whether a dotted module path has a private part (one starting with ``_``).

    Args:
        module_name: A dotted module path, such as ``deepactors.actors._runtime``.

    Returns:
        True when some part of the path starts with an underscore.
    """
    return any(part.startswith("_") for part in module_name.split("."))


def publish(
    namespace_all: Iterable[str], module_name: str, namespace: Mapping[str, object]
) -> None:
    """Give the classes and functions a public package exports that package as module.

    Only names whose ``__module__`` is private change: a name already shown
    under a public module (``deepactors.messages.UserMessage``) keeps it, and
    the first public package to publish a name (a subpackage, whose
    ``__init__`` runs before ``deepactors``' own) keeps it.

    Args:
        namespace_all: The package's ``__all__``.
        module_name: The package's ``__name__``.
        namespace: The package's ``globals()``.
    """
    for name in namespace_all:
        obj = namespace.get(name)  # a lazy name (module __getattr__) is not loaded here
        # Not a callable instance: its __module__ would become an instance attribute.
        if not isinstance(obj, (type, FunctionType)):
            continue
        defined_in = obj.__module__
        if not is_private(defined_in):
            continue
        if isinstance(obj, type):
            _pin_annotations(obj, defined_in)
        obj.__module__ = module_name


def _pin_annotations(cls: type, module_name: str) -> None:
    """Make the string annotations of ``cls`` resolve in ``module_name``, wherever it is shown."""
    own = inspect.get_annotations(cls)  # this class's own, a copy
    if not own:
        return
    # pydantic reads a dataclass's field types from its fields, not __annotations__.
    # Only the fields this class annotates: an inherited field is the base's object.
    fields = cls.__dict__.get("__dataclass_fields__") or {}
    for key, value in own.items():
        own[key] = _pinned(value, module_name)
        field = fields.get(key)
        if field is not None:
            field.type = _pinned(field.type, module_name)
    cls.__annotations__ = own


def _pinned(annotation: object, module_name: str) -> object:
    # A NamedTuple holds its string annotations as ForwardRefs of no module (3.11).
    if isinstance(annotation, ForwardRef) and annotation.__forward_module__ is None:
        annotation = annotation.__forward_arg__
    if not isinstance(annotation, str):
        return annotation
    # is_class: a class annotation may be ClassVar[...], which ForwardRef refuses otherwise.
    return ForwardRef(annotation, is_argument=False, module=module_name, is_class=True)
