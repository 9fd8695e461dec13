"""The operations every interface calls: check, status, runs, replay, backtest, stop (and what a launch says).

The CLI (trainwarden/cli/), the MCP server (trainwarden/mcp_server/) and the Slack bot (bot/) each parse their
input and render their output; what they do in between is one function here, so no interface imports another
and all of them refuse and answer alike. Nothing here prints, and nothing here imports an interface
(tests/unit/test_import_directions.py).
"""
