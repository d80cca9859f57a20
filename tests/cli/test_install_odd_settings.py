"""``loopwarden install claude-code`` on settings files it must not edit (issue 24, item 10):
what is not a regular file is refused at once (a named pipe used to block it forever), and
JSON that could not be written back as JSON (``1e999``, ``NaN``, ``Infinity``) is refused
instead of being rewritten as ``Infinity``."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest
from test_install_claude_code import backups, run_cli, user_settings

pytestmark = pytest.mark.integration  # runs the command line (and the hook) as processes


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_is_refused_without_blocking(tmp_path: Path) -> None:
    path = user_settings(tmp_path)
    path.parent.mkdir()
    os.mkfifo(path)
    for args in ((), ("--uninstall",), ("--dry-run",)):
        result = run_cli(*args, home=tmp_path)  # run_cli times out (fails) if it blocks
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert f"{path} is not a regular file (a named pipe)" in result.stderr
    assert path.is_fifo()


@pytest.mark.parametrize("kind", ["directory", "device", "socket"])
def test_other_non_regular_files_are_refused(tmp_path: Path, kind: str) -> None:
    path = user_settings(tmp_path)
    path.parent.mkdir()
    if kind == "directory":
        path.mkdir()
    elif kind == "device":
        if not Path("/dev/zero").exists():
            pytest.skip("no /dev/zero")
        path.symlink_to("/dev/zero")  # a device that never ends
    else:
        if sys.platform == "win32" or len(str(path)) > 100:
            pytest.skip("no short enough Unix socket path")
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    result = run_cli(home=tmp_path)
    assert result.returncode == 2, result.stdout
    assert f"{path} is not a regular file (a {kind})" in result.stderr


@pytest.mark.parametrize("content", [
    '{"n": 1e999, "hooks": {}}',
    '{"n": -1e999}',
    '{"n": NaN}',
    '{"n": Infinity}',
    '{"n": -Infinity}',
])
def test_numbers_json_cannot_write_back_are_refused(tmp_path: Path, content: str) -> None:
    path = user_settings(tmp_path)
    path.parent.mkdir()
    path.write_text(content, encoding="utf-8")
    result = run_cli(home=tmp_path)
    assert result.returncode == 2, result.stdout
    assert f"{path} is not valid JSON" in result.stderr
    assert "could not be written back" in result.stderr or "too large" in result.stderr
    assert path.read_text(encoding="utf-8") == content and backups(path) == []


def test_large_but_finite_numbers_are_kept(tmp_path: Path) -> None:
    path = user_settings(tmp_path)
    path.parent.mkdir()
    path.write_text('{"n": 1e300, "big": 123456789012345678901234567890}', encoding="utf-8")
    result = run_cli(home=tmp_path)
    assert result.returncode == 0, result.stderr
    text = path.read_text(encoding="utf-8")
    assert '"n": 1e+300' in text and "123456789012345678901234567890" in text
