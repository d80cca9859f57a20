"""A validated :class:`~loopwarden.LoopDetectionConfig`'s values as plain data: the Claude
Code hook's config cache (only the hook uses it, so it lives here, beside it).

The engine and the guard only read a config's attributes. The hook, when it runs in its own
process (started twice per tool call), hands them a snapshot of a config validated once, in
an earlier process, instead of validating again: validation needs pydantic, whose import
alone costs more than the rest of the hook.

A snapshot copies values, it derives nothing: every attribute, the derived switches included
(``rolling_enabled``, ``progress_aware``, ``detector_switches``...), is read from the validated
config, so the rules stay in :mod:`loopwarden.config` alone. The ``detectors`` object is
copied whole, whatever switches the detectors declare. A test checks that the snapshot has
every public attribute of the config. Plain namespaces rather than dataclasses: creating
dataclasses is a noticeable part of a short process's start.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

__all__: list[str] = []

_BOOL: tuple[type, ...] = (bool,)
_OPTIONAL_BOOL: tuple[type, ...] = (bool, type(None))
_COUNT: tuple[type, ...] = (int,)  # a positive int
_TEXT: tuple[type, ...] = (str,)
_NAMES: tuple[type, ...] = (list,)  # of str (a frozenset in the config)
_SWITCHES: tuple[type, ...] = (dict,)  # snake_case name -> bool or None, whichever are declared

NESTED_FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    "post_compaction_guard": {"window_size": _COUNT},
}
"""The nested config objects and their attributes, with the JSON types each may hold."""

FIELDS: dict[str, tuple[type, ...]] = {
    "enabled": _OPTIONAL_BOOL,
    "preset": _TEXT,
    "history_size": _COUNT,
    "warning_threshold": _COUNT,
    "critical_threshold": _COUNT,
    "unknown_tool_threshold": _COUNT,
    "global_circuit_breaker_threshold": _COUNT,
    "error_repeat_threshold": _COUNT,
    # The derived switches (properties of LoopDetectionConfig), copied as values.
    "rolling_enabled": _BOOL,
    "compaction_guard_enabled": _BOOL,
    "error_repeat_enabled": _BOOL,
    "post_outcome_warnings": _BOOL,
    "mask_volatile": _BOOL,
    "learn_volatile": _BOOL,
    "progress_aware": _BOOL,
    "extended_unknown_tools": _BOOL,
    "detector_switches": _NAMES,
    "detectors": _SWITCHES,
}
"""The top-level attributes besides :data:`NESTED_FIELDS`, with their JSON types."""


def snapshot_of(config: Any) -> dict[str, Any] | None:
    """The attributes of a validated config, as JSON data (see :func:`snapshot_from_dict`);
    None for a config with ``perTool`` entries, whose rules (globs, thresholds fitted around
    the top-level ones) are the config's methods: such a config is used as validated."""
    if config.per_tool:
        return None
    data: dict[str, Any] = {name: getattr(config, name) for name in FIELDS}
    data["detector_switches"] = sorted(data["detector_switches"])
    data["detectors"] = config.detectors.switches()
    for name, nested in NESTED_FIELDS.items():
        value = getattr(config, name)
        data[name] = {key: getattr(value, key) for key in nested}
    return data


def snapshot_from_dict(data: object) -> SimpleNamespace | None:
    """An object with the config's attributes, from :func:`snapshot_of`'s data; None for
    anything else (another version's fields, a damaged file), so the caller validates the
    config again."""
    top = _checked(data, FIELDS, nested=NESTED_FIELDS)
    if top is None:
        return None
    for name, nested in NESTED_FIELDS.items():
        value = _checked(top[name], nested)
        if value is None:
            return None
        top[name] = SimpleNamespace(**value)
    top["detector_switches"] = frozenset(top["detector_switches"])
    top["detectors"] = SimpleNamespace(**top["detectors"])
    return SimpleNamespace(**top, per_tool={})  # (snapshot_of takes no config with entries)


def _checked(
    data: object, types: dict[str, tuple[type, ...]],
    nested: dict[str, dict[str, tuple[type, ...]]] | None = None,
) -> dict[str, Any] | None:
    if not isinstance(data, dict):
        return None
    expected = set(types) | set(nested or ())
    if set(data) != expected:
        return None
    for name, allowed in types.items():
        value = data[name]
        # type(), not isinstance: bool is an int, and a count must not be `true`.
        if type(value) not in allowed or (allowed is _COUNT and value < 1):
            return None
        if allowed is _NAMES and not all(type(item) is str for item in value):
            return None
        if allowed is _SWITCHES and not all(
                type(key) is str and type(on) in _OPTIONAL_BOOL for key, on in value.items()):
            return None
    return dict(data)
