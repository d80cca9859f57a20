"""Volatile key stripping (§c.6 and user ``volatile_keys``): a copy of a result without the
keys that churn on every call, keeping sharing and cycles, bounded work.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import islice
from typing import Final

# ---------------------------------------------------------------------------------------------
# Volatile key stripping (§c.6 and user volatile_keys)


def _looks_like_message(value: Mapping[object, object]) -> bool:
    return (
        isinstance(value.get("id"), str)
        and isinstance(value.get("text"), str)
        and (
            isinstance(value.get("direction"), str)
            or isinstance(value.get("senderId"), str)
            or isinstance(value.get("accountId"), str)
            or isinstance(value.get("conversation"), Mapping)
        )
    )


def _strip_keys(value: object, keys: frozenset[str], *, message_ids: bool) -> object:
    """Copy ``value`` without ``keys`` in any nested mapping (iterative; keeps sharing/cycles).

    With ``message_ids``, ``id`` is also dropped from objects that look like a delivered
    message (string ``id`` and ``text`` plus a direction/sender/account/conversation).
    """
    try:
        if not isinstance(value, (Mapping, list, tuple)):
            return value
        return _strip_iteratively(value, keys, message_ids)
    except Exception:
        return value  # a misbehaving custom Mapping: hash it as it is


# Containers one strip copies; past that the rest is hashed as it is (keys not stripped), so a
# mapping that makes up new children on every access cannot keep it copying.
_MAX_COPIES: Final = 250_000


def _strip_iteratively(
    root: Mapping[object, object] | list[object] | tuple[object, ...],
    keys: frozenset[str],
    message_ids: bool,
) -> object:
    # id -> (the source, kept alive so its id is not reused, and its copy)
    copies: dict[int, tuple[object, dict[object, object] | list[object]]] = {}
    pending: list[tuple[object, dict[object, object] | list[object]]] = []
    left = _MAX_COPIES  # copies, and items read from custom mappings, still allowed

    def copy_of(value: object) -> object:
        nonlocal left
        if not isinstance(value, (Mapping, list, tuple)):
            return value
        existing = copies.get(id(value))
        if existing is not None:
            return existing[1]
        if left <= 0:
            return value
        left -= 1
        target: dict[object, object] | list[object] = {} if isinstance(value, Mapping) else []
        copies[id(value)] = (value, target)
        pending.append((value, target))
        return target

    result = copy_of(root)
    while pending:
        source, target = pending.pop()
        if isinstance(target, dict):
            assert isinstance(source, Mapping)
            drop_id = message_ids and _looks_like_message(source)
            items = source.items()
            if type(source) is dict:
                pairs = list(items)
            else:  # (a custom mapping's items may never end)
                pairs = list(islice(items, max(left, 0)))
                left -= len(pairs)
            for key, item in pairs:
                if key in keys or (drop_id and key == "id"):
                    continue
                target[key] = copy_of(item)
        else:
            assert isinstance(source, (list, tuple))
            # As stored: a subclass's __iter__ could go on forever.
            stored = source if type(source) is list or type(source) is tuple else (
                list.__iter__(source) if isinstance(source, list) else tuple.__iter__(source))
            target.extend(copy_of(item) for item in stored)
    return result
