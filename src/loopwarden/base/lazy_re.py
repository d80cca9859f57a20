"""Regular expressions compiled on first use instead of at import.

``re`` compiles in pure Python: the large patterns of the masking and profile modules cost
milliseconds each, and most processes that import those modules never run most of them (the
``openclaw`` preset masks nothing; only exec failures reach the error patterns). Every process
that builds a guard imports them, so this is kept for all of them, not as a Claude Code hook
trick: compiling the ~20 patterns at import adds about 5% to an own-process ``loopwarden
claude-hook`` (12 ms of CPU, measured on a loaded 2-core machine), and the same to every other
process's start. A module names a pattern with :func:`lazy_pattern` and calls the result
where it used the compiled pattern (``_SPANS().sub(...)``); code that runs a pattern in a loop
takes it once before the loop.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import AnyStr

__all__ = ["lazy_pattern"]


def lazy_pattern(pattern: AnyStr, flags: int = 0) -> Callable[[], re.Pattern[AnyStr]]:
    """A function returning ``re.compile(pattern, flags)``, compiled on its first call.

    Two threads calling it first at once may both compile; either result is the same pattern.
    """
    compiled: re.Pattern[AnyStr] | None = None

    def get() -> re.Pattern[AnyStr]:
        nonlocal compiled
        if compiled is None:
            compiled = re.compile(pattern, flags)
        return compiled

    return get
