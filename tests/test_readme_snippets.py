"""README.md's snippets run as pasted, and the CLI's install hints match the README's.

(The snippet runner is added below.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a child that runs in another folder: PYTHONPATH entries
    made absolute (``PYTHONPATH=src`` must still mean this checkout's ``src``)."""
    env = dict(os.environ)
    paths = [str(Path(p).resolve()) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(extra)
    return env


def test_html_hint_gives_the_install_line_that_works_from_a_clone(tmp_path: Path) -> None:
    # `sys.modules[name] = None` makes importlib.util.find_spec(name) answer None: matplotlib
    # looks absent to the command without uninstalling it.
    code = ("import sys; sys.modules['matplotlib'] = None; "
            "from loopwarden._entry import main; sys.exit(main())")
    done = subprocess.run(
        [sys.executable, "-c", code, "scan", "--html", str(tmp_path / "r.html"),
         str(EXAMPLES / "transcripts")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=child_env())
    assert done.returncode == 2, done.stderr
    hint = " ".join(done.stderr.split())
    assert "--html needs matplotlib" in hint
    assert "pip install '.[report]' in a clone" in hint
    assert not (tmp_path / "r.html").exists()
