"""Equivalent argument forms: the same call written with or without keys that only restate a
default (``{}`` and ``{"model": "default"}``, ``{"path": "a"}`` and ``{"path": "a", "offset":
0}``). :func:`core_args_hash` is the hash of the arguments with those keys left out; the
``equivalent_repeat`` detector counts calls with one core hash as one call *only while their
results are identical*, so a key that does matter (its results differ) never merges anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .canonical import canonical_json
from .hashing import args_hash_of_json

#: Strings that name a default rather than a choice (compared case-insensitively).
_DEFAULT_WORDS: Final = frozenset({"default", "auto"})
_MAX_DEPTH: Final = 8
_MAX_KEYS: Final = 256  # larger arguments are left as they are: not a status call's options


def _looks_default(value: Any) -> bool:
    """``None``, ``False``, ``0``, an empty string, list or mapping, or ``"default"`` /
    ``"auto"``: what a caller writes to say "whatever you would do anyway"."""
    if value is None or value is False:
        return True
    if type(value) is int or type(value) is float:
        return value == 0
    if type(value) is str:
        return not value or (len(value) <= 7 and value.strip().lower() in _DEFAULT_WORDS)
    if type(value) is list or type(value) is dict:
        return not value
    return False


def without_defaults(args: Any, depth: int = 0) -> Any:
    """``args`` with every mapping key whose value looks like a default left out (a mapping
    emptied that way is left out too); the same object when nothing is left out."""
    if type(args) is not dict or depth > _MAX_DEPTH or len(args) > _MAX_KEYS:
        return args
    kept: dict[Any, Any] = {}
    changed = False
    for key, value in args.items():
        core = without_defaults(value, depth + 1)
        if core is not value:
            changed = True
            if type(core) is dict and not core:
                continue
        elif _looks_default(value):
            changed = True
            continue
        kept[key] = core
    return kept if changed else args


def core_args_hash(tool_name: str, args: Any, args_hash: str) -> str:
    """The hash of ``args`` with default-looking keys left out (``args_hash`` itself when
    there are none); never raises (a value whose methods raise keeps ``args_hash``)."""
    try:
        core = without_defaults(args)
    except Exception:
        return args_hash
    if core is args or not isinstance(core, Mapping):
        return args_hash
    return args_hash_of_json(tool_name, canonical_json(core))
