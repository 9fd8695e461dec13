"""The published JSON Schemas are current, and the files trainwarden ships or documents validate against them."""

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from trainwarden.agent.watch import RunWatch
from trainwarden.bot.config import BotConfig
from trainwarden.policies.default import default_policy_text
from trainwarden.remote.fleet import Experiment, Server, experiment_files, load_fleet

from trainwarden.schemas import SCHEMAS, schema_text
from trainwarden.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = ROOT / "docs" / "schemas"
EXAMPLES = ROOT / "docs" / "examples"
FIXTURES = ROOT / "tests" / "fixtures"
TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def problems(value: Any, schema: dict[str, Any], at: str = "$") -> list[str]:
    """The JSON Schema keywords the schemas use, checked by hand (jsonschema is not a dependency)."""
    out: list[str] = []
    if "type" in schema and not any(_is(value, t) for t in _list(schema["type"])):
        return [f"{at}: {value!r} is not of type {schema['type']}"]
    if "const" in schema and value != schema["const"]:
        out.append(f"{at}: {value!r} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{at}: {value!r} is not one of {schema['enum']}")
    for key, check in (("anyOf", lambda n: n >= 1), ("oneOf", lambda n: n == 1)):
        if key in schema and not check(sum(not problems(value, s, at) for s in schema[key])):
            out.append(f"{at}: {value!r} does not match {key}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            out.append(f"{at}: {value} < {schema['minimum']}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            out.append(f"{at}: {value} <= {schema['exclusiveMinimum']}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            out.append(f"{at}: too short")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            out.append(f"{at}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            out.append(f"{at}: fewer than {schema['minItems']} items")
        if schema.get("uniqueItems") and len({json.dumps(v) for v in value}) != len(value):
            out.append(f"{at}: items are not unique")
        for i, item in enumerate(value):
            out += problems(item, schema.get("items", {}), f"{at}[{i}]")
    if isinstance(value, dict):
        out += [f"{at}: needs {key!r}" for key in schema.get("required", ()) if key not in value]
        for key, item in value.items():
            if key in schema.get("properties", {}):
                out += problems(item, schema["properties"][key], f"{at}.{key}")
            elif schema.get("additionalProperties") is False:
                out.append(f"{at}: unexpected key {key!r}")
            elif isinstance(schema.get("additionalProperties"), dict):
                out += problems(item, schema["additionalProperties"], f"{at}.{key}")
    return out


def _is(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, TYPES[name])


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def validate(document: Any, name: str) -> list[str]:
    schema = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text())
    found = problems(document, schema)
    try:
        import jsonschema
    except ImportError:
        return found
    agrees = not list(jsonschema.Draft202012Validator(schema).iter_errors(document))
    assert agrees == (not found), (found, document)
    return found


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_committed_schema_is_what_the_code_generates(name):
    committed = SCHEMA_DIR / f"{name}.schema.json"
    assert committed.read_text() == schema_text(name), f"regenerate: trainwarden schema {name} > {committed}"


def test_every_committed_schema_is_published_by_the_cli():
    assert sorted(p.name for p in SCHEMA_DIR.glob("*.schema.json")) == sorted(f"{n}.schema.json" for n in SCHEMAS)


def test_every_field_of_the_typed_models_is_in_its_schema():
    """A parser that reads a key only behind `if` would leave it out of the recorded schema."""
    servers = json.loads(schema_text("servers"))["properties"]["servers"]["items"]["properties"]
    assert {f.name for f in dataclasses.fields(Server)} == set(servers)
    experiment = json.loads(schema_text("experiments"))["properties"]
    assert {f.name for f in dataclasses.fields(Experiment)} - {"gpu_ids", "source"} | {"script"} == set(experiment)
    settings = json.loads(schema_text("settings"))["properties"]
    assert {f.name for f in dataclasses.fields(BotConfig)} == set(settings["slack"]["properties"])
    agent = {f"agent_{k}" for k in settings["agent"]["properties"]} - {"agent_watch"} | {"watches"}
    workers = set(settings["workers"]["properties"])
    top = {"policy_path" if k == "policy" else k for k in settings} - {"agent", "workers"}
    assert {f.name for f in dataclasses.fields(Settings)} - {"source"} == agent | workers | top
    watch = set(settings["agent"]["properties"]["watch"]["items"]["properties"])
    assert {f.name for f in dataclasses.fields(RunWatch)} - {"launch", "launched_at"} == watch  # set by launches


def test_the_default_policy_validates():
    assert validate(yaml.safe_load(default_policy_text()), "policy") == []


def test_the_examples_validate_and_load():
    settings = load_settings(EXAMPLES / "settings.yaml", env={})
    assert validate(yaml.safe_load((EXAMPLES / "settings.yaml").read_text()), "settings") == []
    assert validate(yaml.safe_load((EXAMPLES / "servers.yaml").read_text()), "servers") == []
    files = experiment_files(EXAMPLES / "experiments")
    assert len(files) == 2
    for path in files:
        assert validate(yaml.safe_load(path.read_text()), "experiments") == [], path
    assert settings.servers_file is not None
    fleet = load_fleet(settings.servers_file, files)
    assert sorted(fleet.experiments) == ["baseline", "finetune"]


@pytest.mark.parametrize("fixture", ["bad_port", "gpu_twice", "missing_host", "shell_in_host", "unknown_key"])
def test_the_servers_schema_rejects_what_the_loader_rejects(fixture):
    assert validate(yaml.safe_load((FIXTURES / "servers_invalid" / f"{fixture}.yaml").read_text()), "servers")


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("agent:\n  polll_interval_s: 1\n", "settings"),
        ("workers:\n  runs_per_job: 0\n", "settings"),
        ("slack:\n  allow:\n    deploy: {users: [U1]}\n", "settings"),
        ("name: e\nserver: s\ncommand: x\ncheckpoints: {dir: c, mode: best}\n", "experiments"),
        ("rules:\n  - {id: a, kind: spike, metric: loss, windw: 3}\n", "policy"),
        ("rules:\n  - {id: a, kind: spikes, metric: loss}\n", "policy"),
        ("rules:\n  - {id: a, kind: absence}\n", "policy"),
    ],
)
def test_schemas_reject_unknown_keys_wrong_values_and_missing_fields(text, name):
    assert validate(yaml.safe_load(text), name)


def test_the_cli_prints_a_schema(capsys, monkeypatch):
    from trainwarden.cli.entry import main

    monkeypatch.delenv("TRAINWARDEN_CONFIG", raising=False)
    assert main(["schema", "servers"]) == 0
    assert capsys.readouterr().out == (SCHEMA_DIR / "servers.schema.json").read_text()


def yaml_blocks() -> list[tuple[str, Any]]:
    """The YAML examples in README.md and docs/ that look like one of trainwarden's files."""
    ours = set()
    for name in SCHEMAS:
        ours |= set(json.loads(schema_text(name))["properties"])
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for i, block in enumerate(re.findall(r"```yaml\n(.*?)```", page.read_text(), re.S)):
            document = yaml.safe_load(block)
            if isinstance(document, dict) and set(document) & ours:
                found.append((f"{page.relative_to(ROOT)}#{i}", document))
    return found


def test_the_yaml_examples_in_the_docs_validate():
    blocks = yaml_blocks()
    assert len(blocks) >= 4  # settings, servers, an experiment and a policy, at least
    for where, document in blocks:
        assert any(not validate(document, name) for name in SCHEMAS), where
