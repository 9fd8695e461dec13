"""JSON Schemas of trainwarden's YAML files, for editors (completion, inline errors), and of the
JSON that `trainwarden policy backtest --json` prints, for scripts.

Each file's is recorded from the file's own parser (core/yamlfile.py), so it cannot drift from what
trainwarden accepts; the backtest output's is written beside the code that fills it. The committed
copies in docs/schemas/ are checked against these by a test; regenerate one with
`trainwarden schema NAME > docs/schemas/NAME.schema.json`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from trainwarden.backtest_schema import backtest_schema
from trainwarden.core.errors import UsageError
from trainwarden.core.yamlfile import Schema
from trainwarden.policies.loader import policy_schema
from trainwarden.remote.fleet import experiment_schema, servers_schema
from trainwarden.settings import Settings, settings_schema
from trainwarden.tools.corpus import manifest_schema

SCHEMAS: dict[str, Callable[[], Schema]] = {
    "policy": policy_schema,
    "settings": settings_schema,
    "servers": servers_schema,
    "experiments": experiment_schema,
    "manifest": manifest_schema,
    "backtest": backtest_schema,
}


def schema_text(name: str) -> str:
    """The schema as committed in docs/schemas/NAME.schema.json."""
    if name not in SCHEMAS:
        raise UsageError(f"unknown schema {name!r}; expected one of: {', '.join(SCHEMAS)}")
    return json.dumps(SCHEMAS[name](), indent=2) + "\n"


def cmd_schema(args: argparse.Namespace, settings: Settings) -> int:
    print(schema_text(args.name), end="")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("schema", help="print the JSON Schema of a YAML file trainwarden reads, or of backtest --json")
    s.add_argument("name", choices=list(SCHEMAS), help="which file: " + ", ".join(SCHEMAS))
    s.set_defaults(func=cmd_schema)
