"""Records: rlprof's result classes, made without generated code.

``rlprof run`` imports the analysis and the exporters at its exit, in every run, and the merger,
the scheduling readings and the operator figures before the program starts. A ``@dataclass``
writes the source of its ``__init__``, ``__repr__`` and ``__eq__`` and compiles each with ``exec``
as the class is made (Python 3.11): about 2 M instructions a class, 79 M of the 108 M
instructions that the exit's imports cost, whatever the run. A record's class reads as a
dataclass's: its fields are its annotations, with defaults as class attributes or
``dataclasses.field(default=..., default_factory=...)`` (which leave the class as a dataclass
leaves them). :class:`Record` reads them once, as the class is made, and gives every record the
same ``__init__``, ``__repr__``, ``__eq__`` and :meth:`Record.replace`, written once here. Records
initialise, print, compare (field by field, only with a record of the same class) and refuse to
hash as a dataclass does; ``typing.dataclass_transform`` tells type checkers so, so that each
class's ``__init__`` is checked against its fields. Binding arguments in Python costs more per
record than a compiled ``__init__`` (docs/run.md counts both).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, Callable, NoReturn, TypeVar

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # the marker is read by type checkers only: on Python 3.10 the class stands as it is
    def dataclass_transform(**_: Any) -> Callable[[type], type]:
        return lambda cls: cls

__all__ = ["Record"]

_Self = TypeVar("_Self", bound="Record")
_NO_DEFAULT = dataclasses.MISSING
_FROM_FACTORY = object()


@dataclass_transform(field_specifiers=(dataclasses.field,))
class Record:
    """A base for plain result classes: ``__init__``, ``repr``, equality and ``replace`` over their fields.

    The fields are a base record's fields, then the names the subclass annotates in its own
    body, in order (a ``ClassVar`` annotation is no field). A field without a default may not
    follow one with a default, as in a dataclass. ``__init__`` takes the fields positionally or
    by name, then runs ``__post_init__()`` where the class has one.
    """

    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _defaults: dict[str, Any] = {}
    _factories: dict[str, Callable[[], Any]] = {}
    # What __init__ reads, made from the above once per class: every field with its default (or a
    # marker for a factory's or a required field) in order, the fields that have a factory, how
    # many fields come first without a default, whether the fields can go straight into the
    # instance's __dict__, and __post_init__.
    _filling: dict[str, Any] = {}
    _factory_fields: tuple[tuple[str, Callable[[], Any]], ...] = ()
    _required: int = 0
    _plain_attributes: bool = False
    _post_init: Callable[[Any], None] | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields = list(cls._fields)
        defaults = dict(cls._defaults)
        factories = dict(cls._factories)
        for name, annotation in cls.__dict__.get("__annotations__", {}).items():
            if _is_class_variable(annotation):
                continue
            if name not in fields:
                fields.append(name)
            default = cls.__dict__.get(name, _NO_DEFAULT)
            if isinstance(default, dataclasses.Field):
                # As a dataclass does: the class keeps the default itself, or nothing.
                default, factory = default.default, default.default_factory
                if default is _NO_DEFAULT:
                    delattr(cls, name)
                else:
                    setattr(cls, name, default)
                if factory is not _NO_DEFAULT:
                    factories[name] = factory
                    defaults.pop(name, None)
                    continue
            factories.pop(name, None)
            if default is not _NO_DEFAULT:
                if type(default).__hash__ is None:  # a list, dict or set every instance would share
                    raise ValueError(f"mutable default {type(default)} for field {name} is not allowed: "
                                     "use default_factory")
                defaults[name] = default
            else:
                defaults.pop(name, None)
        _check_defaults_come_last(cls, fields, defaults, factories)
        cls._fields = tuple(fields)
        cls._defaults = defaults
        cls._factories = factories
        cls._filling = {name: _FROM_FACTORY if name in factories else defaults.get(name, _NO_DEFAULT)
                        for name in fields}
        cls._factory_fields = tuple(factories.items())
        cls._required = sum(1 for value in cls._filling.values() if value is _NO_DEFAULT)
        # A field named like a property or a slot, or a class's own __setattr__, must see every
        # field set, as a dataclass's __init__ sets them.
        cls._plain_attributes = cls.__dictoffset__ != 0 and cls.__setattr__ is object.__setattr__ and not any(
            hasattr(type(getattr(cls, name, None)), "__set__") for name in fields)
        cls._post_init = getattr(cls, "__post_init__", None)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        if kwargs or len(args) != len(cls._fields):
            values = _bind(cls, args, kwargs)
        else:
            values = dict(zip(cls._fields, args))
        if cls._plain_attributes:
            # The fields as the instance's own dict, in one step: a loop of setattr was most of
            # a record's making (the analysis makes a BlockStat of 16 fields per block of a dump).
            self.__dict__ = values
        else:
            for name, value in values.items():
                setattr(self, name, value)
        if cls._post_init is not None:
            cls._post_init(self)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__qualname__}({fields})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # as tuples, as a dataclass compares

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    __hash__ = None  # type: ignore[assignment] - mutable and compared by value, as a dataclass

    def replace(self: _Self, **changes: Any) -> _Self:
        """A new record of the same class, with ``changes`` (``dataclasses.replace``)."""
        return type(self)(**{**{name: getattr(self, name) for name in self._fields}, **changes})


def _bind(cls: type[Record], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Every field and its value, in order: the arguments, then the defaults; raises as a
    dataclass's ``__init__`` does."""
    fields = cls._fields
    values = cls._filling.copy()  # every field, in order: a key updated keeps its place
    if args:
        if len(args) > len(fields) or not kwargs.keys().isdisjoint(fields[:len(args)]):
            _refuse(cls, args, kwargs)
        values.update(zip(fields, args))
    values.update(kwargs)
    if len(values) != len(fields):  # a keyword that names no field
        _refuse(cls, args, kwargs)
    for name, factory in cls._factory_fields:
        if values[name] is _FROM_FACTORY:
            values[name] = factory()  # a fresh list or dict for every record
    for name in fields[len(args):cls._required]:
        if values[name] is _NO_DEFAULT:
            _refuse_missing(cls, values)
    return values


def _refuse_missing(cls: type[Record], values: dict[str, Any]) -> NoReturn:
    """Raise the ``TypeError`` a dataclass's ``__init__`` raises for required fields not given."""
    missing = [repr(name) for name in cls._fields[:cls._required] if values[name] is _NO_DEFAULT]
    raise TypeError(f"{cls.__qualname__}.__init__() missing {len(missing)} required positional "
                    f"argument{'s' if len(missing) > 1 else ''}: {_listed(missing)}")


def _refuse(cls: type[Record], args: tuple[Any, ...], kwargs: dict[str, Any]) -> NoReturn:
    """Raise the ``TypeError`` a dataclass's ``__init__`` raises for these arguments."""
    fields = cls._fields
    if len(args) > len(fields):
        raise TypeError(f"{cls.__qualname__}.__init__() takes {len(fields) + 1} positional arguments "
                        f"but {len(args) + 1} were given")
    for name in kwargs:
        if name not in fields:
            raise TypeError(f"{cls.__qualname__}.__init__() got an unexpected keyword argument {name!r}")
        if name in fields[:len(args)]:
            raise TypeError(f"{cls.__qualname__}.__init__() got multiple values for argument {name!r}")
    raise AssertionError("the arguments were refused for no reason")


def _listed(names: list[str]) -> str:
    """``'a'``, ``'a' and 'b'``, ``'a', 'b', and 'c'``: as Python lists missing arguments."""
    if len(names) < 3:
        return " and ".join(names)
    return f"{', '.join(names[:-1])}, and {names[-1]}"


def _is_class_variable(annotation: Any) -> bool:
    # Annotations are strings under ``from __future__ import annotations``, as dataclasses reads them.
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return text.startswith(("ClassVar", "typing.ClassVar"))


def _check_defaults_come_last(cls: type, fields: list[str], defaults: dict[str, Any],
                              factories: dict[str, Any]) -> None:
    with_default = False
    for name in fields:
        if name in defaults or name in factories:
            with_default = True
        elif with_default:
            raise TypeError(f"{cls.__qualname__}: non-default argument {name!r} follows default argument")
