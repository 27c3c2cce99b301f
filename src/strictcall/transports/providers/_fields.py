"""Reading a provider's turn, SDK objects or plain dicts alike, without importing the SDK."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, cast

from strictcall.core.refusals import malformed_call
from strictcall.errors import Reason, Rejection


class _Absent:
    """The marker of a member that is not there (None and "" are values, not absence)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()


_MAPPING_TYPES: dict[type, bool] = {}
_TYPES_KEPT: Final = 256


def is_mapping(item: object) -> bool:
    """Whether `item` is read by key (a mapping) rather than by attribute (an SDK object).

    Known per type once asked: an `isinstance` against the `Mapping` ABC costs an SDK object,
    which is none, some 40 % of the rest of reading its call.
    """
    kind = type(item)
    known = _MAPPING_TYPES.get(kind)
    if known is None:
        known = isinstance(item, Mapping)
        if len(_MAPPING_TYPES) < _TYPES_KEPT:  # a handful of types per process
            _MAPPING_TYPES[kind] = known
    return known


def as_dict(mapping: object) -> dict[str, object]:
    """A mapping of another type as a dict (`is_mapping` said it is one), to be read as one."""
    return dict(cast("Mapping[str, object]", mapping))


def read_field(item: object, name: str) -> object:
    """`item[name]` of a mapping or `item.name` of an SDK object; ABSENT when not there.

    The SDKs build their response objects without validation and give a missing member as None,
    so for an object None is absence; a mapping's None is a value (the wrong type).
    """
    if type(item) is dict or is_mapping(item):
        return item.get(name, ABSENT)  # type: ignore[attr-defined]
    value = getattr(item, name, None)
    return ABSENT if value is None else value


def items_of(container: object, member: str) -> list[object] | tuple[object, ...]:
    """The list a provider's turn holds at `member` (`tool_calls`, `output`, `content`), or the
    list itself when one is given; an absent or null member is no items.

    Raises:
        TypeError: neither a list nor an object holding one at `member`.
    """
    if type(container) is list or isinstance(container, list | tuple):
        return container
    items = read_field(container, member)
    if items is ABSENT:
        return []
    if isinstance(items, list | tuple):
        return items
    raise TypeError(f"expected a list of items or an object with a list at {member!r}")


def read_str(item: object, name: str, parent: str) -> str | Rejection:
    """The non-empty str at `name`, or the located refusal of what is there instead."""
    value = read_field(item, name)
    if type(value) is str or isinstance(value, str):
        if value:
            return str.__str__(value)
        return malformed_call(f"{parent}/{name}", Reason.MIN_LENGTH, 1)
    if value is ABSENT:
        return malformed_call(parent, Reason.MISSING_MEMBER, name)
    return malformed_call(f"{parent}/{name}", Reason.TYPE, "string")
