"""`trainwarden mcp`: the command line of the MCP server (stdio by default, or streamable HTTP with --http).

Imports no `mcp` until the command runs: the CLI registers every command at start, and the agent's lean
install has no `mcp` (pip install 'trainwarden[mcp]').
"""

from __future__ import annotations

import argparse
import ipaddress
import logging

from trainwarden import wiring
from trainwarden.extras import require
from trainwarden.mcp_server.config import HTTP_HOST, HTTP_PORT
from trainwarden.settings import Settings

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("mcp", help="serve checks, status, replay and (if allowed) stop and launch to an AI agent "
                       "over the Model Context Protocol (stdio, or --http)")  # fmt: skip
    s.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    s.add_argument("--host", default=HTTP_HOST, metavar="ADDR",
                   help=f"with --http: the address to bind (default {HTTP_HOST}: this machine only)")  # fmt: skip
    s.add_argument("--port", type=int, default=HTTP_PORT, help=f"with --http: the port (default {HTTP_PORT})")
    s.set_defaults(func=cmd_mcp)


def cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    require("mcp", "mcp")
    from trainwarden.mcp_server.server import build

    wiring.check_redis(settings)  # refused credentials end it here, in one line; an absent Redis is said per call
    server = build(settings, wiring.store(settings))
    allowed = ", ".join(sorted(settings.mcp.allow_actions)) or "none (reads only)"
    try:
        if not args.http:
            log.info("MCP server on stdio; actions allowed: %s", allowed)
            server.run()
            return 0
        if not _loopback(args.host) and settings.mcp.allow_actions:
            log.warning("serving MCP on %s with actions allowed (%s) and no authentication: anyone who reaches "
                        "that address can use them", args.host, allowed)  # fmt: skip
        log.info("MCP server on http://%s:%d/mcp; actions allowed: %s", args.host, args.port, allowed)
        server.run("streamable-http", host=args.host, port=args.port)
    except KeyboardInterrupt:
        pass  # Ctrl-C ends a server started by hand
    return 0


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
