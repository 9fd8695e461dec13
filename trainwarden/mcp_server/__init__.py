"""`trainwarden mcp`: a Model Context Protocol server, so that a research agent can check, stop and launch runs.

This package's `__init__` and `config` import no `mcp`: the settings (which every daemon reads) hold the
`mcp:` section, and the agent and the console bot must run without the `mcp` extra.
"""
