"""The hook command ``loopwarden install`` writes: ``PYTHON -S .../loopwarden/cli/_hook.py
claude-hook ARGS``, run as a file, once per hook event (three times per Claude Code tool call).

Half of what a hook process costs is Python's start: ``site`` (site-packages, ``.pth`` files)
and, in the ``loopwarden`` console script pip writes, ``re``. A hook handed to the resident
server needs neither: this file puts the folder that holds the loopwarden package in place of
its own folder on ``sys.path`` (run as a file, ``sys.path[0]`` is ``cli/``, whose modules must
not shadow anything) and runs the console script's :func:`loopwarden.cli._entry.main`, which
loads ``site`` after all when the hook must be answered in its own process.
"""

import os
import sys

if __name__ == "__main__":
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from loopwarden.cli._entry import main

    sys.exit(main())
