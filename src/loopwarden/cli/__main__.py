"""``python -m loopwarden.cli ARGS``: the command line (``python -m loopwarden`` is the demo)."""

from __future__ import annotations

from . import main

if __name__ == "__main__":
    main()
