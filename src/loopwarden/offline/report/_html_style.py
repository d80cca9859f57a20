"""The HTML report's style sheet, inlined into the page (the page loads nothing)."""

from __future__ import annotations

_CSS = """
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0;
       color: #1d1d1f; background: #fff; }
main { max-width: 1240px; margin: 0 auto; padding: 18px 24px 48px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 28px 0 8px; padding-bottom: 4px; border-bottom: 1px solid #e3e3e6; }
h3 { font-size: 15px; margin: 26px 0 4px; overflow-wrap: anywhere; }
h4 { font-size: 14px; margin: 0 0 4px; overflow-wrap: anywhere; }
p { margin: 6px 0; }
a { color: #0b57d0; text-decoration: none; } a:hover { text-decoration: underline; }
code { font: 12.5px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; overflow-wrap: anywhere; }
.meta { color: #5f6368; font-size: 13px; overflow-wrap: anywhere; }
.headline { font-size: 15px; margin: 10px 0 0; }
table { border-collapse: collapse; margin: 8px 0 12px; width: 100%; }
th, td { border-bottom: 1px solid #e3e3e6; padding: 4px 8px; text-align: left; vertical-align: top;
         overflow-wrap: anywhere; }
th { background: #f3f3f5; font-size: 13px; font-weight: 600; }
td.call { white-space: nowrap; overflow-wrap: normal; }
.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; overflow-wrap: normal; }
td.path { overflow-wrap: anywhere; min-width: 12em; }
tr.block td.lvl { color: #b3161a; font-weight: 600; } tr.warn td.lvl { color: #9a6400; font-weight: 600; }
.badge { display: inline-block; padding: 0 7px; border-radius: 9px; font-size: 12px; font-weight: 600;
         white-space: nowrap; }
.badge.block { background: #fde2e2; color: #b3161a; } .badge.warn { background: #fff1d6; color: #8a5a00; }
.badge.ok { background: #e3f5e6; color: #1b6e2a; }
.plot { overflow-x: auto; margin: 8px 0; }
img.timeline { display: block; width: 100%; max-width: 1100px; height: auto; border: 1px solid #eee; }
pre { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; max-height: 15em; overflow-y: auto;
      font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
      background: #f6f7f9; padding: 4px 6px; border-radius: 4px; }
.loop { border-left: 3px solid #e3e3e6; padding: 2px 0 2px 14px; margin: 16px 0; }
.loop.critical { border-left-color: #f4a6a6; } .loop.warning { border-left-color: #f5c26b; }
blockquote.told { margin: 4px 0 8px; padding: 6px 10px; border-left: 4px solid #e69f00;
                  background: #fffaf0; overflow-wrap: anywhere; }
blockquote.told.block { border-left-color: #d62728; background: #fff5f5; }
.told .who { display: block; font-size: 12px; color: #5f6368; }
dl.glossary { margin: 4px 0; display: grid; grid-template-columns: minmax(10em, 17em) 1fr;
               gap: 6px 16px; }
dl.glossary dt { font-weight: 600; } dl.glossary dd { margin: 0; color: #333; }
details > summary { cursor: pointer; font-weight: 600; margin: 8px 0; }
.problems { color: #8a4b00; font-size: 12px; overflow-wrap: anywhere; }
table.calls td.args { width: 36%; } table.calls td.result { width: 50%; }
@media (max-width: 720px) {
  main { padding: 12px 12px 32px; }
  table.stack, table.stack tbody, table.stack tr, table.stack td { display: block; width: auto; }
  table.stack thead { display: none; }
  table.stack tr { border: 1px solid #e3e3e6; border-radius: 6px; margin: 0 0 10px; padding: 4px 0; }
  table.stack td { border: 0; padding: 2px 10px; text-align: left; white-space: normal; min-width: 0; }
  table.stack td[data-label]::before { content: attr(data-label) ": "; color: #5f6368; font-weight: 600; }
  table.calls td.args, table.calls td.result { width: auto; }
  /* Numbers and call references share lines in a card instead of one line each. */
  table.stack td.num, table.stack td.call { display: inline-block; padding-right: 4px; }
  dl.glossary { display: block; } dl.glossary dt { margin-top: 8px; }
  dl.glossary dd { margin: 2px 0 0 18px; }
  .plot img.timeline { width: 720px; max-width: none; }
}
"""
