"""JSON Schema checks with bounded cost: a time limit, a size cap and no catastrophic regex.

jsonschema applies ``pattern`` and ``patternProperties`` with Python's ``re``, whose
backtracking can take exponential time (``^(a+)+$`` against 27 ``a`` and ``!``: seconds;
each character more doubles it), and checks ``uniqueItems`` of unsortable items pairwise.
Schemas and arguments come from outside, so every check here is bounded:

* :func:`bounded` extends a jsonschema validator class (jsonschema's documented way:
  ``validators.extend``) so that ``pattern``, ``patternProperties``,
  ``additionalProperties`` and ``unevaluatedProperties`` search with the ``regex`` package
  and a timeout, ``uniqueItems`` is linear (hashing), and every keyword first checks the
  time limit in force;
* :func:`time_limit` sets that limit, in CPU seconds of the thread (a check that was
  merely descheduled is not charged): past it, :class:`SchemaCheckTimeout` is raised;
* :func:`schema_size_fault` caps a schema's nodes (:data:`MAX_SCHEMA_NODES`) and its
  patterns' length (:data:`MAX_PATTERN_CHARS`), which bound what compiling costs;
* :func:`format_checker` checks ``format: regex`` (the meta-schema's, for ``pattern``)
  with the engine the checks use.

Regular expressions keep the dialect jsonschema used (Python's, which the ``regex`` package
follows); only their cost is bounded.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import attrs
import regex
from jsonschema import FormatChecker, ValidationError, validators
from jsonschema.exceptions import SchemaError

#: CPU seconds one call's arguments may take to check against its tool's schema.
CALL_CHECK_SECONDS = 0.05
#: CPU seconds the schema checks of the calls finalized together (a stream's end) may take in all.
BATCH_CHECK_SECONDS = 0.1
#: CPU seconds building a registry may take: every tool's meta-schema check, in all.
BUILD_CHECK_SECONDS = 1.0
#: Nodes (objects, arrays and scalars) one tool's schema may hold.
MAX_SCHEMA_NODES = 20_000
#: Characters one ``pattern`` (or ``patternProperties`` key) may hold: compiling costs
#: about its length, and cannot be interrupted.
MAX_PATTERN_CHARS = 1_000
#: Keywords checked for the time limit once every this many keyword applications (reading
#: a thread's CPU clock is a system call).
_EVERY = 16


class SchemaCheckTimeout(Exception):
    """A schema check did not finish within its time limit (``seconds``)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the schema check did not finish within {seconds * 1000:.0f} ms")
        self.seconds = seconds


class CheckBudget:
    """CPU seconds the schema checks of calls finalized together (a stream's end) may spend
    in all (``total``), each at most ``per_call``: one response of many calls whose checks
    each run to their limit holds the caller up ``total`` seconds, not ``per_call`` times the
    number of calls. A check given no time left still runs, and times out at its first
    pattern or within a few keywords."""

    def __init__(self, total: float = BATCH_CHECK_SECONDS, per_call: float = CALL_CHECK_SECONDS) -> None:
        self.left = total
        self.per_call = per_call

    @contextmanager
    def allowance(self) -> Iterator[float]:
        """The seconds the next check may take; what it took is charged when the block ends."""
        start = time.thread_time()
        try:
            yield max(0.0, min(self.per_call, self.left))
        finally:
            self.left -= time.thread_time() - start


class _Limit:
    __slots__ = ("deadline", "seconds", "count")

    def __init__(self, deadline: float, seconds: float) -> None:
        self.deadline, self.seconds, self.count = deadline, seconds, 0

    def left(self) -> float:
        return self.deadline - time.thread_time()


_LIMIT: contextvars.ContextVar[_Limit | None] = contextvars.ContextVar("schema_check_limit", default=None)


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Checks within the block raise :class:`SchemaCheckTimeout` once ``seconds`` of this
    thread's CPU time passed (an enclosing, earlier limit still holds)."""
    outer = _LIMIT.get()
    deadline = time.thread_time() + seconds
    if outer is not None and outer.deadline < deadline:
        deadline, seconds = outer.deadline, outer.seconds
    token = _LIMIT.set(_Limit(deadline, seconds))
    try:
        yield
    finally:
        _LIMIT.reset(token)


def _tick() -> None:
    limit = _LIMIT.get()
    if limit is not None:
        limit.count += 1
        if limit.count % _EVERY == 0 and time.thread_time() > limit.deadline:
            raise SchemaCheckTimeout(limit.seconds)


@lru_cache(maxsize=512)
def compiled(pattern: str) -> Any:
    """``pattern`` compiled by the ``regex`` package (cached); raises ``regex.error``."""
    return regex.compile(pattern)


def search(pattern: str, text: str) -> bool:
    """True if ``pattern`` matches somewhere in ``text`` (``re.search``'s meaning), within
    the time limit in force (:class:`SchemaCheckTimeout` past it)."""
    limit = _LIMIT.get()
    if limit is None:
        return compiled(pattern).search(text) is not None
    left = limit.left()
    if left <= 0:
        raise SchemaCheckTimeout(limit.seconds)
    try:
        return compiled(pattern).search(text, timeout=left) is not None
    except TimeoutError:
        raise SchemaCheckTimeout(limit.seconds) from None


# ------------------------------------------------------------------ keywords


def _pattern(validator: Any, patrn: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not search(patrn, instance):
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional(instance: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    return [k for k in instance if k not in properties and not any(search(p, k) for p in patterns)]


def _extras(extras: list[Any]) -> str:
    return f"{', '.join(repr(e) for e in extras)} {'was' if len(extras) == 1 else 'were'}"


def _additional_properties(validator: Any, aP: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    extras = _additional(instance, schema)
    if validator.is_type(aP, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], aP, path=extra)
    elif not aP and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            patterns = ", ".join(repr(p) for p in sorted(schema["patternProperties"]))
            yield ValidationError(f"{', '.join(repr(e) for e in sorted(extras))} {verb} not match any of the regexes: {patterns}")
        else:
            yield ValidationError(f"Additional properties are not allowed ({_extras(sorted(extras, key=str))} unexpected)")


def _evaluated_keys(validator: Any, instance: dict[str, Any], schema: Any) -> set[str]:
    """Keys of ``instance`` that ``schema`` evaluates (JSON Schema 2020-12, 11.3; 2019-09 alike):
    jsonschema's own walk, with patterns searched by :func:`search`."""
    if validator.is_type(schema, "boolean"):
        return set()
    keys: set[str] = set()
    for keyword in ("$ref", "$dynamicRef", "$recursiveRef"):
        ref = schema.get(keyword)
        if ref is None:
            continue
        if keyword == "$recursiveRef":
            from jsonschema._legacy_keywords import lookup_recursive_ref  # draft 2019-09 only

            resolved = lookup_recursive_ref(validator._resolver)
        else:
            resolved = validator._resolver.lookup(ref)
        keys |= _evaluated_keys(validator.evolve(schema=resolved.contents, _resolver=resolved.resolver), instance, resolved.contents)
    properties = schema.get("properties")
    if validator.is_type(properties, "object"):
        keys |= properties.keys() & instance.keys()
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        subschema = schema.get(keyword)
        if subschema is not None:
            keys |= {k for k, v in instance.items() if next(validator.descend(v, subschema), None) is None}
    for pattern in schema.get("patternProperties", {}):
        keys |= {k for k in instance if search(pattern, k)}
    for key, subschema in schema.get("dependentSchemas", {}).items():
        if key in instance:
            keys |= _evaluated_keys(validator, instance, subschema)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword, []):
            if next(validator.descend(instance, subschema), None) is None:
                keys |= _evaluated_keys(validator, instance, subschema)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            keys |= _evaluated_keys(validator, instance, schema["if"])
            if "then" in schema:
                keys |= _evaluated_keys(validator, instance, schema["then"])
        elif "else" in schema:
            keys |= _evaluated_keys(validator, instance, schema["else"])
    return keys


def _unevaluated_properties(validator: Any, uP: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    evaluated = _evaluated_keys(validator, instance, schema)
    failing = [
        key for key in instance
        if key not in evaluated and next(validator.descend(instance[key], uP, path=key, schema_path=key), None) is not None
    ]
    if failing:
        if uP is False:
            yield ValidationError(f"Unevaluated properties are not allowed ({_extras(sorted(failing, key=str))} unexpected)")
        else:
            yield ValidationError(f"Unevaluated properties are not valid under the given schema ({_extras(failing)} unevaluated and invalid)")


def _frozen(value: Any) -> Any:
    """A hashable stand-in for a JSON value, equal where JSON Schema's equality says so
    (``1`` and ``1.0`` equal, ``true`` and ``1`` not; object key order ignored)."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list):
        return ("a", tuple(_frozen(v) for v in value))
    if isinstance(value, dict):
        return ("o", frozenset((k, _frozen(v)) for k, v in value.items()))
    return ("z", None) if value is None else ("?", id(value))


def _unique_items(validator: Any, uI: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if uI and validator.is_type(instance, "array"):
        seen: set[Any] = set()
        for item in instance:
            key = _frozen(item)
            if key in seen:
                yield ValidationError(f"{instance!r} has non-unique elements")
                return
            seen.add(key)


_REPLACED: dict[str, Callable[..., Any]] = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "unevaluatedProperties": _unevaluated_properties,
    "uniqueItems": _unique_items,
}


def _timed(keyword: Callable[..., Any]) -> Callable[..., Any]:
    def check(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _tick()
        return keyword(validator, value, instance, schema)

    return check


@lru_cache(maxsize=None)
def bounded(cls: Any) -> Any:
    """``cls`` (a jsonschema validator class) with every keyword bounded as the module
    docstring says; its :meth:`check_schema` checks ``format: regex`` with :func:`format_checker`."""
    keywords = {k: _timed(_REPLACED.get(k, fn)) for k, fn in cls.VALIDATORS.items()}
    extended = validators.extend(cls, keywords)
    extended.FORMAT_CHECKER = format_checker(cls)
    # jsonschema's ``evolve`` (every subschema, every $ref) picks the class for a subschema
    # that names its ``$schema`` (a $ref to the root, the meta-schema's vocabularies) from
    # its own table: the unbounded class. This one picks the same draft, bounded.
    init = [(f.name, f.alias) for f in attrs.fields(extended) if f.init]

    def evolve(self: Any, **changes: Any) -> Any:
        schema = changes.setdefault("schema", self.schema)
        for name, alias in init:
            if alias not in changes:
                changes[alias] = getattr(self, name)
        return bounded(validators.validator_for(schema, default=cls))(**changes)

    extended.evolve = evolve
    return extended


def check_schema(cls: Any, schema: Any) -> None:
    """Check ``schema`` against the meta-schema of ``cls`` (a :func:`bounded` class) with the
    bounded keywords: ``cls.check_schema`` would pick the unbounded draft class for the
    meta-schema. Raises ``jsonschema.exceptions.SchemaError`` for the first fault."""
    validator = cls(cls.META_SCHEMA, format_checker=cls.FORMAT_CHECKER)
    for error in validator.iter_errors(schema):
        raise SchemaError.create_from(error)


def format_checker(cls: Any) -> FormatChecker:
    """``cls``'s format checker with ``regex`` checked by the ``regex`` package (cached
    compile: the checks then reuse it)."""
    checker = FormatChecker(formats=())
    checker.checkers = {**cls.FORMAT_CHECKER.checkers, "regex": (_compiles, regex.error)}
    return checker


def _compiles(instance: object) -> bool:
    if isinstance(instance, str):
        compiled(instance)
    return True


# ------------------------------------------------------------------ size


def _segment(part: Any) -> str:
    return "/" + str(part).replace("~", "~0").replace("/", "~1")


def schema_size_fault(schema: Any, max_nodes: int = MAX_SCHEMA_NODES, max_pattern: int = MAX_PATTERN_CHARS) -> str | None:
    """Why ``schema`` is too large to check (more than ``max_nodes`` nodes, or a ``pattern``
    or ``patternProperties`` key longer than ``max_pattern`` characters, named by its JSON
    Pointer), or None. Never quotes a schema value."""
    nodes = 0
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        node, pointer = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            return f"the schema has more than {max_nodes:,} nodes"
        if isinstance(node, dict):
            pattern = node.get("pattern")
            if isinstance(pattern, str) and len(pattern) > max_pattern:
                return f"the pattern at {_cut(pointer + '/pattern')} is longer than {max_pattern:,} characters"
            keyed = node.get("patternProperties")
            if isinstance(keyed, dict) and any(isinstance(k, str) and len(k) > max_pattern for k in keyed):
                return f"a patternProperties key at {_cut(pointer + '/patternProperties')} is longer than {max_pattern:,} characters"
            stack.extend((v, pointer + _segment(k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, f"{pointer}/{i}") for i, v in enumerate(node))
    return None


def _cut(pointer: str, limit: int = 120) -> str:
    return pointer if len(pointer) <= limit else pointer[: limit - 1] + "…"
