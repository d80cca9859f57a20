"""Loop detection configuration: the validated model, presets, and OpenClaw config loading.

What lives where:

- ``errors``: ``ConfigError`` and the key-path text of its messages;
- ``presets``: ``Preset`` (threshold defaults and feature switches), ``PRESETS``, the order rule;
- ``validation``: the models' base class (field checks; pydantic errors become ``ConfigError``);
- ``model``: the pydantic models, ``LoopDetectionConfig`` and its parts;
- ``openclaw_file``: JSON/JSON5 files, per-agent blocks, merging and repair;
- ``snapshot``: a validated config's values as plain data (the Claude Code hook's cache).

Every name importable from ``loopwarden.config`` when it was one module still is, private
helpers included (other modules and tests use a few, and pickles name two).
"""

from __future__ import annotations

# (Not imported from typing: the Claude Code hook imports config.snapshot, and with it this
# file, without pydantic or typing. Type checkers read any TYPE_CHECKING as true.)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import json5 as json5  # tests replace json5.loads through this module

    from ..base.errors import LoopwardenError as LoopwardenError
    from .errors import ConfigError
    from .errors import Issue as Issue
    from .errors import _key_segment as _key_segment  # cli/config.py spells key paths with it
    from .model import (
        DetectorsConfig,
        LoopDetectionConfig,
        PerToolConfig,
        PostCompactionGuardConfig,
    )
    from .model import logger as logger
    from .openclaw_file import (
        MAX_CONFIG_BYTES,
        LoadedConfig,
        config_from_mapping,
        load_config,
        load_config_with_origins,
    )
    from .openclaw_file import Scope as Scope
    from .presets import PRESETS, Preset
    from .presets import PresetName as PresetName

__all__ = [
    "MAX_CONFIG_BYTES",
    "PRESETS",
    "ConfigError",
    "DetectorsConfig",
    "LoadedConfig",
    "LoopDetectionConfig",
    "PerToolConfig",
    "PostCompactionGuardConfig",
    "Preset",
    "config_from_mapping",
    "load_config",
    "load_config_with_origins",
]

# The names, by their home, loaded on first use (PEP 562).
_HOMES: dict[str, str] = {
    "ConfigError": "errors", "Issue": "errors", "_key_segment": "errors",
    "DetectorsConfig": "model", "LoopDetectionConfig": "model", "PerToolConfig": "model",
    "PostCompactionGuardConfig": "model", "logger": "model",
    "MAX_CONFIG_BYTES": "openclaw_file", "LoadedConfig": "openclaw_file",
    "config_from_mapping": "openclaw_file", "load_config": "openclaw_file",
    "load_config_with_origins": "openclaw_file", "Scope": "openclaw_file",
    "PRESETS": "presets", "Preset": "presets", "PresetName": "presets",
}

# The former module's private helpers, by their new home: still importable from here (tests
# use some, and pickles name _rebuild_config_error and _FrozenDict), looked up on first use.
# Replacing one here does not reach the module that uses it; patch it in its home instead.
_MOVED: dict[str, str] = {
    **dict.fromkeys((
        "_UNSET", "_Unset", "_child_path", "_describe", "_join_path", "_join_path_text",
        "_rebuild_config_error", "_with_value",
    ), "errors"),
    **dict.fromkeys((
        "_CRITICAL_ORDER_MESSAGE", "_THRESHOLD_FIELDS", "_THRESHOLD_ORDER", "_TOOL_THRESHOLDS",
        "_WARNING_ORDER_MESSAGE",
    ), "presets"),
    **dict.fromkeys((
        "_CTX_PATH", "_CTX_VALUE", "_ConfigModel", "_MergedScopes", "_aliases_at",
        "_canonical_keys", "_config_error", "_issues", "_loc_path", "_object_or_model",
        "_optional_bool", "_positive_int", "_strict_bool",
    ), "validation"),
    **dict.fromkeys((
        "_FrozenDict", "_GLOB_CHARS", "_LoopDetectionBlock", "_PER_TOOL", "_field_name",
        "_fit_thresholds", "_merge_keywise", "_merge_per_tool", "_repair_text", "_tool_patterns",
    ), "model"),
    **dict.fromkeys((
        "_Block", "_DuplicateKeys", "_FILE_KINDS", "_JSON5_POSITION", "_NESTED_KEYS",
        "_agent_block", "_agent_blocks", "_agent_id", "_block_keys", "_duplicate_key_error",
        "_global_block", "_listed_id", "_merge", "_optional_mapping", "_parse", "_parse_json5",
        "_path_to", "_read_config_text", "_require_regular_file", "_resolve_document", "_too_large",
    ), "openclaw_file"),
}


if not TYPE_CHECKING:  # mypy keeps checking imports from here against the names above

    def __getattr__(name: str) -> Any:
        from importlib import import_module

        if name == "json5":
            return import_module("json5")
        if name == "LoopwardenError":
            return import_module("..base.errors", __name__).LoopwardenError
        home = _HOMES.get(name) or _MOVED.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(import_module(f"{__name__}.{home}"), name)
        if name in _HOMES:
            globals()[name] = value  # the next look-up does not come here again
        return value

    def __dir__() -> list[str]:
        return sorted([*globals(), *_HOMES, *_MOVED, "json5", "LoopwardenError"])
