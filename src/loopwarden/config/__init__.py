"""Loop detection configuration: the validated model, presets, and OpenClaw config loading.

What lives where:

- ``presets``: ``Preset`` (threshold defaults and feature switches), ``PRESETS``, the order rule;
- ``validation``: the models' base class (field checks; pydantic errors become ``ConfigError``);
- ``model``: the pydantic models, ``LoopDetectionConfig`` and its parts;
- ``switches`` and ``detectors``: the detector switches, which the detectors declare, and the
  ``detectors`` object that holds them;
- ``openclaw_file``: JSON/JSON5 files, per-agent blocks, merging and repair;

The public names load on first use (PEP 562): ``import loopwarden`` imports ``switches`` (and
with it this file), and a process that never validates a config never loads pydantic.
"""

from __future__ import annotations

# (Not imported from typing: every `import loopwarden` imports this file (see switches.py).
# Type checkers read any TYPE_CHECKING as true.)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..base.errors import ConfigError, key_segment
    from .detectors import DetectorsConfig
    from .model import (
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
    "DetectorsConfig": "detectors", "LoopDetectionConfig": "model", "PerToolConfig": "model",
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
