"""A synchronous handle on the real `mcp` client library talking to `python -m trainwarden mcp`.

The client runs in an event loop on a thread of its own (anyio's blocking portal), so a test can call a
tool, then act (a worker carries out the stop), then call the next tool, all in one MCP session, as an
agent does. The server is a real subprocess on stdio, or the same over streamable HTTP.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, Implementation, TextContent, Tool

from tests.conftest import REPO

CLIENT = "pytest-agent"
TIMEOUT_S = 60.0  # per request: a loaded 2-core machine


class Client:
    def __init__(self, portal: BlockingPortal, session: ClientSession) -> None:
        self.portal = portal
        self.session = session

    def tools(self) -> list[Tool]:
        return self.portal.call(self.session.list_tools).tools

    def call(self, tool: str, **arguments: Any) -> CallToolResult:
        return self.portal.call(lambda: self.session.call_tool(tool, arguments, read_timeout_seconds=TIMEOUT_S))

    def text(self, tool: str, **arguments: Any) -> str:
        """The tool's text; the test fails with that text if the tool said it failed."""
        result = self.call(tool, **arguments)
        assert not result.is_error, text_of(result)
        return text_of(result)

    def data(self, tool: str, **arguments: Any) -> Any:
        """A tool's structured result (the SDK wraps a list as {"result": [...]})."""
        result = self.call(tool, **arguments)
        assert not result.is_error, text_of(result)
        return result.structured_content["result"]


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def server_argv(settings: Path, *args: str) -> list[str]:
    return ["-m", "trainwarden", "--config", str(settings), "--log-level", "INFO", "mcp", *args]


@asynccontextmanager
async def _session(transport: Any, name: str) -> AsyncIterator[ClientSession]:
    """A session over `transport` (stdio's or streamable HTTP's context manager, which yields its two streams)."""
    info = Implementation(name=name, version="1.0")
    async with transport as (read, write), ClientSession(read, write, client_info=info) as session:
        await session.initialize()
        yield session


@contextmanager
def stdio(settings: Path, log: Path, *, name: str = CLIENT, env: dict[str, str] | None = None) -> Iterator[Client]:
    """`trainwarden mcp` on stdio, started by the client as Claude Code starts it; its stderr goes to `log`."""
    params = StdioServerParameters(command=sys.executable, args=server_argv(settings), cwd=str(REPO),
                                   env={**os.environ, **(env or {})})  # fmt: skip
    with open(log, "w") as errlog, start_blocking_portal() as portal:
        session = _session(stdio_client(params, errlog=errlog), name)
        with portal.wrap_async_context_manager(session) as opened:
            yield Client(portal, opened)


@contextmanager
def http(url: str, *, name: str = CLIENT) -> Iterator[Client]:
    """A client of a `trainwarden mcp --http` already listening at `url`."""
    with start_blocking_portal() as portal:
        session = _session(streamable_http_client(url), name)
        with portal.wrap_async_context_manager(session) as opened:
            yield Client(portal, opened)
