"""``--preset`` before ``--`` belongs to loopwarden; an unknown option there is a usage error
(exit 2), never started as the MCP server (issue 22, friction 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def _proxy(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "loopwarden", "mcp-proxy", *args],
                          input="", capture_output=True, text=True, env=env, timeout=60,
                          check=False)


def test_preset_before_the_double_dash_is_ours_and_the_server_runs(tmp_path: Path) -> None:
    done = _proxy(tmp_path, "--preset", "early", "--", sys.executable, "-c", "pass")
    assert done.returncode == 0, done.stderr
    assert "cannot start" not in done.stderr


def test_an_unknown_option_before_the_double_dash_is_a_usage_error(tmp_path: Path) -> None:
    done = _proxy(tmp_path, "--bogus", "--", sys.executable, "-c", "pass")
    assert done.returncode == 2
    assert "--bogus" in done.stderr and "cannot start" not in done.stderr


def test_an_unknown_preset_lists_the_allowed_ones(tmp_path: Path) -> None:
    done = _proxy(tmp_path, "--preset", "fastest", "--", sys.executable, "-c", "pass")
    assert done.returncode == 2
    assert '"early"' in done.stderr
