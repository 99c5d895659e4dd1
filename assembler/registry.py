"""The tools registered for a turn, and their argument schemas.

Accepts the ``tools`` array a client sent: OpenAI Chat Completions
(``[{"type": "function", "function": {"name", "parameters"}}]``), OpenAI Responses
(``[{"type": "function", "name", "parameters"}]``) or Anthropic Messages
(``[{"name", "input_schema"}]``). Server tools without a schema are registered by name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import exceptions as js_exceptions
from jsonschema import validators

from .untrusted import parse_json


class RegistryError(ValueError):
    """A tools file or array cannot be used; the message says which entry and why."""


@dataclass(frozen=True, slots=True)
class SchemaIssue:
    """One JSON Schema error: a JSON Pointer into the arguments and the failed keyword.

    ``message`` is jsonschema's own text, which may quote argument values: show it only
    when the user asked to reveal argument text.
    """

    pointer: str
    keyword: str
    expected: str
    message: str


def _property_names(schema: Any) -> frozenset[str]:
    """Every object key a schema names (under ``properties`` or ``required``, at any depth)."""
    names: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            props = node.get("properties")
            if isinstance(props, dict):
                names.update(k for k in props if isinstance(k, str))
            required = node.get("required")
            if isinstance(required, list):
                names.update(k for k in required if isinstance(k, str))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return frozenset(names)


def _schema_fault(exc: js_exceptions.SchemaError) -> str:
    """Where a schema breaks its meta-schema and which rule, without quoting the schema's
    values (jsonschema's message does; a schema may hold defaults or examples)."""
    pointer = "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in exc.absolute_path) or "/"
    if exc.validator == "type":
        return f"{pointer} must be of type {' or '.join(exc.validator_value) if isinstance(exc.validator_value, list) else exc.validator_value}"
    return f"{pointer} breaks the meta-schema's {exc.validator!r} rule"


class ToolRegistry:
    """Registered tool names, each with an optional compiled JSON Schema validator."""

    def __init__(self, schemas: dict[str, dict[str, Any] | None]) -> None:
        self._validators: dict[str, Any] = {}
        self._declared: dict[str, frozenset[str]] = {name: _property_names(s) for name, s in schemas.items() if s}
        for name, schema in schemas.items():
            if schema is None:
                self._validators[name] = None
                continue
            cls = validators.validator_for(schema)
            try:
                cls.check_schema(schema)
            except js_exceptions.SchemaError as exc:
                raise RegistryError(f"tool {name!r}: invalid JSON Schema: {_schema_fault(exc)}") from None
            except RecursionError:  # the meta-schema check recurses several frames per level
                raise RegistryError(f"tool {name!r}: JSON Schema nested too deep to check") from None
            self._validators[name] = cls(schema)

    @classmethod
    def from_tools(cls, tools: Any) -> "ToolRegistry":
        """Build from an OpenAI or Anthropic ``tools`` array (or ``{"tools": [...]}``)."""
        if isinstance(tools, dict) and "tools" in tools:
            tools = tools["tools"]
        if not isinstance(tools, list):
            raise RegistryError("expected a JSON array of tools (or an object with a 'tools' array)")
        schemas: dict[str, dict[str, Any] | None] = {}
        for i, tool in enumerate(tools):
            if not isinstance(tool, dict):
                raise RegistryError(f"tools[{i}]: expected an object")
            spec = tool.get("function") if isinstance(tool.get("function"), dict) else tool
            name = spec.get("name")
            if not isinstance(name, str) or not name:
                raise RegistryError(f"tools[{i}]: missing 'name'")
            schema = spec.get("parameters", spec.get("input_schema", spec.get("inputSchema")))
            if schema is not None and not isinstance(schema, dict):
                raise RegistryError(f"tools[{i}] ({name}): schema must be an object")
            schemas[name] = schema
        return cls(schemas)

    @classmethod
    def load(cls, path: Path) -> "ToolRegistry":
        """Read a JSON file holding a ``tools`` array; :class:`RegistryError` names the file
        and what is wrong (unreadable, not UTF-8, not JSON, not a usable tools array)."""
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise RegistryError(f"{path}: cannot read tools: {exc.strerror or exc}") from None
        doc, problem = parse_json(raw)
        if problem is not None:
            raise RegistryError(f"{path}: cannot read tools: the file is {problem}")
        try:
            return cls.from_tools(doc)
        except RegistryError as exc:
            raise RegistryError(f"{path}: {exc}") from None

    @property
    def names(self) -> list[str]:
        return list(self._validators)

    def __contains__(self, name: object) -> bool:
        return name in self._validators

    def validate(self, name: str, arguments: Any) -> list[SchemaIssue]:
        """All schema errors of ``arguments`` for tool ``name`` (empty when valid or no schema)."""
        validator = self._validators.get(name)
        if validator is None:
            return []
        declared = self._declared.get(name, frozenset())
        issues = []
        for err in sorted(validator.iter_errors(arguments), key=lambda e: [str(p) for p in e.absolute_path]):
            # A key the schema does not name is argument text: shown as "*", never quoted.
            segments = (str(p) if isinstance(p, int) or p in declared else "*" for p in err.absolute_path)
            pointer = "".join("/" + s.replace("~", "~0").replace("/", "~1") for s in segments)
            expected = json.dumps(err.validator_value, ensure_ascii=False) if err.validator != "$ref" else ""
            issues.append(SchemaIssue(pointer or "/", str(err.validator), expected[:120], err.message))
        return issues
