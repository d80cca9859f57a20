"""The offline tools: saved transcripts read (``transcripts``), replayed (``findings``,
``scan``), scored against labels (``evaluation``, ``calibration``) and reported (``report``).

They use the guard and the engine as a live door would, and no door imports them. This file
imports nothing: ``loopwarden.offline.scan`` does not load the HTML report.
"""
