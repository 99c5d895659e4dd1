"""The tools registered for a turn, and their argument schemas.

Accepts the ``tools`` array a client sent: OpenAI Chat Completions
(``[{"type": "function", "function": {"name", "parameters"}}]``), OpenAI Responses
(``[{"type": "function", "name", "parameters"}]``) or Anthropic Messages
(``[{"name", "input_schema"}]``). Server tools without a schema are registered by name.
The Responses built-in tools a *client* runs have no name: each registers the name its
calls carry (:data:`BUILTIN_CLIENT_TOOLS`: ``{"type": "shell"}`` → ``shell`` ...).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema import exceptions as js_exceptions
from jsonschema import validators
from jsonschema_specifications import REGISTRY as META_SCHEMAS

from toollatch.redaction.published import published_strings
from toollatch.core.schemacheck import BUILD_CHECK_SECONDS, CALL_CHECK_SECONDS, SchemaCheckTimeout, bounded, check_schema, schema_size_fault, time_limit
from toollatch.wire.untrusted import parse_json, short

#: Where a schema's ``$ref`` may lead: the schema itself and the JSON Schema meta-schemas
#: (which jsonschema adds). Nothing is ever fetched: a remote ``$ref`` does not resolve.
_NO_RETRIEVAL: referencing.Registry[Any] = referencing.Registry()


#: Responses built-in tools the client runs, by ``type``: the name their calls carry (the
#: output item type without ``_call``; :mod:`.dialects.responses_items`). No schema.
BUILTIN_CLIENT_TOOLS: dict[str, str] = {
    "local_shell": "local_shell",
    "shell": "shell",
    "apply_patch": "apply_patch",
    "computer": "computer",
    "computer_use_preview": "computer",
    "tool_search": "tool_search",
}


class RegistryError(ValueError):
    """A tools file or array cannot be used; the message says which entry and why."""


class SchemaUnusable(ValueError):
    """A registered tool's schema cannot be applied to arguments: a ``$ref`` that does not
    resolve, a schema too large to check, or (``timed_out``) one whose own check against its
    meta-schema did not finish in time. ``problem`` says where (the ``$ref``'s JSON Pointer
    when it was found as the registry was built); neither it nor the message quotes a
    schema or argument value."""

    def __init__(self, name: str, problem: str, timed_out: bool = False) -> None:
        super().__init__(f"tool {short(name)}: {'schema_check_timeout' if timed_out else 'invalid JSON Schema'}: {problem}")
        self.problem = problem
        self.timed_out = timed_out


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


def _segment(part: Any) -> str:
    """``/`` and ``part`` as a JSON Pointer reference token (RFC 6901: ``~`` as ``~0``, ``/`` as ``~1``)."""
    return "/" + str(part).replace("~", "~0").replace("/", "~1")


def _schema_fault(exc: js_exceptions.SchemaError) -> str:
    """Where a schema breaks its meta-schema and which rule, without quoting the schema's
    values (jsonschema's message does; a schema may hold defaults or examples)."""
    pointer = _cut("".join(_segment(p) for p in exc.absolute_path) or "/")
    if exc.validator == "type":
        return f"{pointer} must be of type {' or '.join(exc.validator_value) if isinstance(exc.validator_value, list) else exc.validator_value}"
    return f"{pointer} breaks the meta-schema's {exc.validator!r} rule"


def _cut(pointer: str, limit: int = 120) -> str:
    """A JSON Pointer into a schema, cut to ``limit`` characters (keys may be long)."""
    return pointer if len(pointer) <= limit else pointer[: limit - 1] + "…"


def _pointers(schema: Any) -> dict[int, str]:
    """JSON Pointer of every object and array in ``schema``, by ``id()``."""
    found: dict[int, str] = {}
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        node, pointer = stack.pop()
        if isinstance(node, dict):
            found.setdefault(id(node), pointer)
            stack.extend((v, pointer + _segment(k)) for k, v in node.items())
        elif isinstance(node, list):
            found.setdefault(id(node), pointer)
            stack.extend((v, f"{pointer}/{i}") for i, v in enumerate(node))
    return found


def _unresolved_ref(cls: Any, schema: dict[str, Any]) -> str | None:
    """Where ``schema`` has a ``$ref`` that does not lead to a schema, as a sentence naming
    the JSON Pointer of that ``$ref`` (never the reference's text); None when every
    ``$ref`` that can be followed without an instance does.

    Follows the subschemas the schema's draft defines, with the base URI each ``$id``
    sets, as the validator does; ``$dynamicRef`` and ``$recursiveRef`` depend on the
    instance and are left to validation time, as is a schema of a shape this walk does
    not expect.
    """
    try:
        return _walk_refs(cls, schema)
    except (TypeError, AttributeError, ValueError):
        return None


def _walk_refs(cls: Any, schema: dict[str, Any]) -> str | None:
    spec = referencing.jsonschema.specification_with(cls.META_SCHEMA.get("$schema", ""), default=referencing.Specification.OPAQUE)
    where = _pointers(schema)
    root = META_SCHEMAS.resolver_with_root(spec.create_resource(schema))
    stack: list[tuple[Any, Any]] = [(schema, root)]
    seen: set[int] = set()
    while stack:
        node, resolver = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        resolver = resolver.in_subresource(spec.create_resource(node))
        ref = node.get("$ref")
        if isinstance(ref, str):
            at = _cut(where.get(id(node), "") + "/$ref")
            try:
                resolved = resolver.lookup(ref)
            except referencing.exceptions.Unresolvable:
                return f"$ref at {at} does not resolve (only references within the schema are followed)"
            if not isinstance(resolved.contents, (dict, bool)):
                return f"$ref at {at} does not point to a schema"
            if id(resolved.contents) in where:  # within this schema: its own $refs are followed too
                stack.append((resolved.contents, resolved.resolver))
        stack.extend((sub, resolver) for sub in spec.subresources_of(node))
    return None


#: ``validator_for``'s answer for a ``$schema`` it does not know.
_UNKNOWN_DRAFT = object()


def _validator_class(name: str, schema: dict[str, Any]) -> Any:
    """The jsonschema validator class for ``schema``'s ``$schema`` (the newest draft when it
    has none); :class:`RegistryError` for a ``$schema`` that is not a string or names no
    meta-schema jsonschema knows (one is never fetched, so such a schema cannot be checked)."""
    if "$schema" not in schema:
        return validators.validator_for(schema)
    uri = schema["$schema"]
    if not isinstance(uri, str):
        raise RegistryError(f"tool {short(name)}: invalid JSON Schema: /$schema must be a string (a meta-schema URI), not {_json_type(uri)}")
    cls = validators.validator_for(schema, default=_UNKNOWN_DRAFT)
    if cls is _UNKNOWN_DRAFT and uri.startswith(("http://json-schema.org/", "https://json-schema.org/")):
        # the same draft spelled with the other scheme (generators write https:// for draft-07)
        other = "https://" + uri[7:] if uri.startswith("http://") else "http://" + uri[8:]
        cls = validators.validator_for({"$schema": other}, default=_UNKNOWN_DRAFT)
    if cls is _UNKNOWN_DRAFT:
        raise RegistryError(
            f"tool {short(name)}: invalid JSON Schema: /$schema {short(uri)} is not a JSON Schema draft this checker knows"
            " (draft 3, 4, 6, 7, 2019-09, 2020-12); meta-schemas are never fetched"
        )
    return cls


def _json_type(value: Any) -> str:
    for kind, name in ((bool, "a boolean"), (int, "a number"), (float, "a number"), (str, "a string"), (list, "an array"), (dict, "an object")):
        if isinstance(value, kind):
            return name
    return "null" if value is None else type(value).__name__


class ToolRegistry:
    """Registered tool names, each with an optional compiled JSON Schema validator.

    Raises :class:`RegistryError` naming the tool for a schema that breaks its
    meta-schema or is nested too deep to check. A ``$ref`` is never fetched from the
    network. A schema holding a ``$ref`` that does not resolve within it, one too large to
    check (:func:`~toollatch.core.schemacheck.schema_size_fault`: over 20,000 nodes, a pattern over
    1,000 characters), or one whose meta-schema check did not finish within
    ``build_seconds`` (CPU seconds for all the tools together) is kept but listed in
    :attr:`unusable`: every call of that tool fails (``schema_invalid``, or
    ``schema_check_timeout`` for the last) naming why, while the other tools are judged as
    usual. Loading a tools file (:meth:`load`) or :meth:`ensure_usable` refuses such a schema
    instead.

    Checks are bounded (:mod:`toollatch.core.schemacheck`): patterns are searched with a time
    limit, and a call's arguments get ``CALL_CHECK_SECONDS`` (50 ms) of CPU time at most.
    """

    def __init__(self, schemas: dict[str, dict[str, Any] | None], *, build_seconds: float = BUILD_CHECK_SECONDS) -> None:
        self._validators: dict[str, Any] = {}
        self._declared: dict[str, frozenset[str]] = {}
        self._published: dict[str, frozenset[str]] = {}
        #: tool name -> why its schema cannot be applied (a ``$ref`` that does not resolve...)
        self.unusable: dict[str, str] = {}
        self._timed_out: set[str] = set()  # of unusable: the meta-schema check ran out of time
        with time_limit(build_seconds):
            for name, schema in schemas.items():
                self._add(name, schema)

    def _add(self, name: str, schema: dict[str, Any] | None) -> None:
        if schema is None:
            self._validators[name] = None
            return
        cls = bounded(_validator_class(name, schema))
        too_large = schema_size_fault(schema)
        if too_large is not None:
            self.unusable[name] = too_large
            self._validators[name] = cls({}, registry=_NO_RETRIEVAL)
            return
        self._declared[name] = _property_names(schema)
        self._published[name] = published_strings(schema)
        try:
            check_schema(cls, schema)
            unresolved = _unresolved_ref(cls, schema)
        except SchemaCheckTimeout as exc:
            self.unusable[name] = f"the JSON Schema's own check did not finish within {exc.seconds * 1000:.0f} ms"
            self._timed_out.add(name)
            self._validators[name] = cls({}, registry=_NO_RETRIEVAL)
            return
        except js_exceptions.SchemaError as exc:
            raise RegistryError(f"tool {short(name)}: invalid JSON Schema: {_schema_fault(exc)}") from None
        except RecursionError:  # the meta-schema check recurses several frames per level
            raise RegistryError(f"tool {short(name)}: JSON Schema nested too deep to check") from None
        except Exception as exc:  # the schema library tripping over a shape its meta-schema let pass
            raise RegistryError(f"tool {short(name)}: JSON Schema cannot be compiled ({type(exc).__name__})") from None
        if unresolved is not None:
            self.unusable[name] = unresolved
        self._validators[name] = cls(schema, registry=_NO_RETRIEVAL)

    def ensure_usable(self) -> "ToolRegistry":
        """This registry, or :class:`RegistryError` naming the first tool in :attr:`unusable`
        and why (the JSON Pointer of its ``$ref``, its size, or ``schema_check_timeout``;
        never a schema value)."""
        for name, problem in self.unusable.items():
            raise RegistryError(str(SchemaUnusable(name, problem, name in self._timed_out)))
        return self

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
            if name is None and tool.get("type") in BUILTIN_CLIENT_TOOLS:
                schemas[BUILTIN_CLIENT_TOOLS[tool["type"]]] = None
                continue
            if not isinstance(name, str) or not name:
                raise RegistryError(f"tools[{i}]: missing 'name'")
            schema = spec.get("parameters", spec.get("input_schema", spec.get("inputSchema")))
            if schema is not None and not isinstance(schema, dict):
                raise RegistryError(f"tools[{i}] ({short(name)}): schema must be an object, not {_json_type(schema)}")
            schemas[name] = schema
        return _cached(cls, schemas)

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
            return cls.from_tools(doc).ensure_usable()
        except RegistryError as exc:
            raise RegistryError(f"{path}: {exc}") from None

    @property
    def names(self) -> list[str]:
        return list(self._validators)

    def __contains__(self, name: object) -> bool:
        return name in self._validators

    def published(self, name: str) -> frozenset[str]:
        """The strings tool ``name``'s schema publishes as values (:func:`published_strings`:
        ``enum`` members and ``const`` values); empty for a tool without a schema, an
        unknown name, or a schema too large to check."""
        return self._published.get(name, frozenset())

    def validate(self, name: str, arguments: Any, seconds: float = CALL_CHECK_SECONDS) -> list[SchemaIssue]:
        """All schema errors of ``arguments`` for tool ``name`` (empty when valid or no schema).

        Raises :class:`SchemaUnusable` when the schema cannot be applied (a ``$ref`` met
        while validating does not resolve), :class:`~toollatch.core.schemacheck.SchemaCheckTimeout`
        when the check takes more than ``seconds`` of CPU time (a pattern that backtracks
        catastrophically on the arguments, or a huge check), and RecursionError for
        arguments nested deeper than a recursive schema check can go.
        """
        validator = self._validators.get(name)
        if validator is None:
            return []
        if name in self.unusable:
            raise SchemaUnusable(name, self.unusable[name], name in self._timed_out)
        declared = self._declared.get(name, frozenset())
        issues = []
        try:
            with time_limit(seconds):
                errors = sorted(validator.iter_errors(arguments), key=lambda e: [str(p) for p in e.absolute_path])
        except referencing.exceptions.Unresolvable:  # jsonschema's wrapper of it too; its text quotes the $ref
            raise SchemaUnusable(name, "a $ref met while validating does not resolve") from None
        for err in errors:
            # A key the schema does not name is argument text: shown as "*", never quoted.
            segments = (str(p) if isinstance(p, int) or p in declared else "*" for p in err.absolute_path)
            pointer = "".join(_segment(s) for s in segments)
            expected = json.dumps(err.validator_value, ensure_ascii=False) if err.validator != "$ref" else ""
            issues.append(SchemaIssue(pointer or "/", str(err.validator), expected[:120], err.message))
        return issues


#: Registries built lately, by their schemas' JSON text: an agent sends the same tools with
#: every request, and checking large schemas against their meta-schema costs milliseconds.
_BUILT: OrderedDict[str, ToolRegistry] = OrderedDict()
_BUILT_LOCK = threading.Lock()
_BUILT_KEEP = 32


def _cached(cls: type[ToolRegistry], schemas: dict[str, dict[str, Any] | None]) -> ToolRegistry:
    """``cls(schemas)``, reused when the same schemas were built lately (a registry is never
    changed once built, and its checks keep no state, so threads may share it)."""
    try:
        key = json.dumps(list(schemas.items()))
    except (TypeError, ValueError, RecursionError):  # not plain JSON: built each time
        return cls(schemas)
    with _BUILT_LOCK:
        found = _BUILT.get(key)
        if found is not None and type(found) is cls:
            _BUILT.move_to_end(key)
            return found
    built = cls(schemas)
    with _BUILT_LOCK:
        _BUILT[key] = built
        while len(_BUILT) > _BUILT_KEEP:
            _BUILT.popitem(last=False)
    return built

