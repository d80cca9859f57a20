"""The detector switches (``tools.loopDetection.detectors``), declared by the detectors.

A detector's switch lives with the detector: its module declares it,
``SWITCH = detector_switch("my_check")``, and names ``SWITCH`` in its rows. The config accepts
under ``detectors`` exactly the declared switches (camelCase or snake_case; any other key is
an error naming the valid ones), and the config reports which are on. Nothing on this floor
lists them.

The detectors sit on the engine floor, above this one, so this module cannot import them.
The package root, which sits above every floor, hands it the function that does
(:func:`load_switches_with`); the first look-up at the declared switches calls it. A config
is therefore never checked against a partial list, whatever was imported first.

Cheap to import (no pydantic, no typing): the package root imports it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # (not from typing: see above; type checkers read any TYPE_CHECKING as true)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

# (What other floors use: the detectors declare. The rest serves this floor, the package root
# and tests.)
__all__ = ["detector_switch"]

# snake_case name -> default: True or False, or None for "the preset decides" (the
# :class:`~loopwarden.config.presets.Preset` attribute of the same name).
_DECLARED: dict[str, bool | None] = {}
# The same, sorted by name (whatever the order the detectors were imported in); never changed
# in place, so a caller's view stays whole. (A dict: `types` would cost `import loopwarden`.)
_view: list[Mapping[str, bool | None]] = [{}]
_loader: list[Callable[[], object]] = []


def detector_switch(name: str, *, default: bool | None = True) -> str:
    """Declare the switch ``detectors.<name>`` (snake_case; camelCase in config files) and
    return ``name``, for the detector's rows to name. ``default=None``: the preset decides.
    Declaring a switch again with the same default is harmless; with another, an error."""
    if _DECLARED.setdefault(name, default) != default:
        raise ValueError(f"detector switch {name!r} declared twice with different defaults")
    _view[0] = dict(sorted(_DECLARED.items()))
    return name


def withdraw_switch(name: str) -> None:
    """Forget a declared switch (a detector taken out again, as tests do with toy ones)."""
    _DECLARED.pop(name, None)
    _view[0] = dict(sorted(_DECLARED.items()))


def declared_switches() -> Mapping[str, bool | None]:
    """Every declared switch, snake_case, with its default (None: the preset decides), sorted
    by name."""
    for load in tuple(_loader):  # (another thread importing too waits on the import lock)
        load()
        _loader.clear()
    return _view[0]


def load_switches_with(loader: Callable[[], object]) -> None:
    """Have :func:`declared_switches` call ``loader`` (which imports the detectors) once,
    before its first answer."""
    _loader[:] = [loader]
