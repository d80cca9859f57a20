"""The resident hook server answers with its own environment, so whether Claude Code has a
user to ask (``exit_behavior="ask"``) is part of which server a hook may use."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from loopwarden.cli._resident import socket_path


def test_interactive_and_print_mode_hooks_never_share_a_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (A short folder: a socket's path is limited to about 100 bytes.)
    runtime = Path(tempfile.mkdtemp(prefix="lw-"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.chdir(tmp_path)
    argv = ["--exit-behavior", "ask"]
    paths = {}
    for attended, entry in (("1", "cli"), ("0", "sdk-cli")):
        monkeypatch.setenv("CLAUDE_CODE_SESSION_ATTENDED", attended)
        monkeypatch.setenv("CLAUDE_CODE_ENTRYPOINT", entry)
        paths[attended] = socket_path(argv)
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "another-session")  # not part of the key
    again = socket_path(argv)

    for folder in runtime.glob("*"):
        folder.rmdir()
    runtime.rmdir()
    assert None not in paths.values() and paths["1"] != paths["0"]
    assert again == paths["0"]
