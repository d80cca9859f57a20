"""Loop detection configuration: the validated model, presets, and OpenClaw config loading.

What lives where:

- ``presets``: ``Preset`` (threshold defaults and feature switches), ``PRESETS``, the order rule;
- ``validation``: the models' base class (field checks; pydantic errors become ``ConfigError``);
- ``model``: the pydantic models, ``LoopDetectionConfig`` and its parts;
- ``openclaw_file``: JSON/JSON5 files, per-agent blocks, merging and repair;
- ``snapshot``: a validated config's values as plain data (the Claude Code hook's cache).

The public names load on first use (PEP 562): the Claude Code hook imports ``snapshot`` (and
with it this file) without loading pydantic.
"""

from __future__ import annotations

# (Not imported from typing: the Claude Code hook imports config.snapshot, and with it this
# file, without pydantic or typing. Type checkers read any TYPE_CHECKING as true.)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..base.errors import ConfigError, key_segment
    from .model import (
        DetectorsConfig,
        LoopDetectionConfig,
        PerToolConfig,
        PostCompactionGuardConfig,
    )
    from .openclaw_file import (
        MAX_CONFIG_BYTES,
        LoadedConfig,
        config_from_mapping,
        load_config,
        load_config_with_origins,
    )
    from .presets import PRESETS

__all__ = [
    "MAX_CONFIG_BYTES",
    "PRESETS",
    "ConfigError",
    "DetectorsConfig",
    "LoadedConfig",
    "LoopDetectionConfig",
    "PerToolConfig",
    "PostCompactionGuardConfig",
    "config_from_mapping",
    "key_segment",
    "load_config",
    "load_config_with_origins",
]

# Each name by the module that defines it.
_HOMES: dict[str, str] = {
    "ConfigError": "..base.errors", "key_segment": "..base.errors",
    "DetectorsConfig": "model", "LoopDetectionConfig": "model", "PerToolConfig": "model",
    "PostCompactionGuardConfig": "model",
    "MAX_CONFIG_BYTES": "openclaw_file", "LoadedConfig": "openclaw_file",
    "config_from_mapping": "openclaw_file", "load_config": "openclaw_file",
    "load_config_with_origins": "openclaw_file",
    "PRESETS": "presets",
}


if not TYPE_CHECKING:  # mypy checks imports from here against the names above

    def __getattr__(name: str) -> Any:
        from importlib import import_module

        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(import_module(home if home.startswith(".") else f".{home}", __name__), name)
        globals()[name] = value  # the next look-up does not come here again
        return value


    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
