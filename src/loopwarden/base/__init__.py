"""The shared bottom floor: what every other floor may import, importing none of them.

- ``errors``: every loopwarden exception (their tree is in its docstring);
- ``types``: :class:`ToolCall` and ``MISSING``;
- ``text``, ``paths``, ``redact``, ``lazy_re``, ``log``: text for log lines and ids, the default
  database path, secret redaction, patterns compiled on first use, the package's loggers.

This file imports nothing: the Claude Code hook imports single modules from here.
"""
