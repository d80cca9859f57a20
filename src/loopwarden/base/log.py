"""loopwarden's loggers, all under ``loopwarden``, which gets a ``NullHandler``: a library logs,
the application decides where it goes (no "last resort" output on stderr).

Every module that logs takes its logger from here, so the handler is in place before anything
is logged, and ``import loopwarden`` alone does not load :mod:`logging`: the resident
``claude-hook`` client imports the package and nothing else of it.
"""

from __future__ import annotations

import logging

__all__ = ["get_logger"]

logging.getLogger("loopwarden").addHandler(logging.NullHandler())


def get_logger(name: str = "loopwarden") -> logging.Logger:
    """The logger ``name`` (``loopwarden`` or one under it)."""
    return logging.getLogger(name)
