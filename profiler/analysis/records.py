"""Records: the analysis' and the exporters' result classes, made without generated code.

``rlprof run`` imports the analysis and the exporters at its exit, in every run. A
``@dataclass`` writes the source of its ``__init__``, ``__repr__`` and ``__eq__`` and compiles
each with ``exec`` as the class is made (Python 3.11): about 2 M instructions a class, 79 M of
the 108 M instructions that those imports cost, whatever the run. A record's class lists its
fields as annotations, as a dataclass's does, and writes its ``__init__`` by hand; it takes
``__repr__``, ``__eq__`` and :meth:`Record.replace` from :class:`Record`, which reads the
fields from the class's own annotations once, as the class is made. Records print, compare
(field by field, only with a record of the same class) and refuse to hash as a dataclass does.
"""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["Record"]

_Self = TypeVar("_Self", bound="Record")


class Record:
    """A base for plain result classes: ``repr``, equality and ``replace`` over their fields.

    The fields are the names the subclass annotates in its own body, in order.
    """

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._fields = tuple(cls.__dict__.get("__annotations__", ()))

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
