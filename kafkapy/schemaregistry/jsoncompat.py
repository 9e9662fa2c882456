"""JSON Schema compatibility, as Confluent's registry decides it.

Confluent's checker (json-schema-provider's `diff` package) does not ask "does every document of
one schema validate against the other": it walks the old schema (the "original") and the new one
(the "update") side by side, names every difference it finds (TYPE_NARROWED, MAX_LENGTH_ADDED,
PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL, ...) and calls the change compatible when every
difference is in its list of compatible ones. This module does the same walk in our own code, with
Confluent's difference names so that the 409 messages read like Confluent's.

BACKWARD compares (original=latest, update=new); FORWARD the other way round.

The shapes of a schema follow the classes of the everit library Confluent parses with: a schema is
"empty" (true, {} or annotations only), "false", a string, number (integer is a number that
requires integers), boolean, null, object or array schema, an enum (const is an enum of one value),
a combined schema (allOf/anyOf/oneOf; a list of types is an anyOf of one schema per type; a schema
with several of these parts is the allOf of them), a not, or an if/then/else. `$ref`s are followed:
local ones inside the document that holds them, others to the referenced schemas (Confluent's
`references`), by the reference's name, optionally with a `#/...` pointer into it.

One concern at about 650 lines: the walk is one recursive comparison whose cases (one per shape)
call each other, so it stays in one module, as Confluent's is one package.
"""
from __future__ import annotations

import json
import re

__all__ = ["COMPATIBLE_CHANGES", "JsonModel", "json_differences", "json_incompatibilities"]

MAX_DEPTH = 64
# schema pairs one check may compare: combined schemas are compared branch by branch, so nested
# anyOf/oneOf (or $refs shared by many paths) could otherwise take exponential time on the event loop
MAX_COMPARISONS = 50_000

# Confluent's SchemaDiff.COMPATIBLE_CHANGES: every other difference makes a change incompatible
COMPATIBLE_CHANGES = frozenset([
    "ID_CHANGED", "DESCRIPTION_CHANGED", "TITLE_CHANGED", "DEFAULT_CHANGED", "SCHEMA_REMOVED", "TYPE_EXTENDED",
    "MAX_LENGTH_INCREASED", "MAX_LENGTH_REMOVED", "MIN_LENGTH_DECREASED", "MIN_LENGTH_REMOVED",
    "PATTERN_REMOVED", "MAXIMUM_INCREASED", "MAXIMUM_REMOVED", "MINIMUM_DECREASED", "MINIMUM_REMOVED",
    "EXCLUSIVE_MAXIMUM_INCREASED", "EXCLUSIVE_MAXIMUM_REMOVED", "EXCLUSIVE_MINIMUM_DECREASED",
    "EXCLUSIVE_MINIMUM_REMOVED", "MULTIPLE_OF_REDUCED", "MULTIPLE_OF_REMOVED",
    "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", "REQUIRED_ATTRIBUTE_REMOVED", "DEPENDENCY_ARRAY_NARROWED",
    "DEPENDENCY_ARRAY_REMOVED", "DEPENDENCY_SCHEMA_REMOVED", "MAX_PROPERTIES_INCREASED",
    "MAX_PROPERTIES_REMOVED", "MIN_PROPERTIES_DECREASED", "MIN_PROPERTIES_REMOVED",
    "ADDITIONAL_PROPERTIES_ADDED", "ADDITIONAL_PROPERTIES_EXTENDED",
    "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "MAX_ITEMS_INCREASED", "MAX_ITEMS_REMOVED",
    "MIN_ITEMS_DECREASED", "MIN_ITEMS_REMOVED", "UNIQUE_ITEMS_REMOVED", "ADDITIONAL_ITEMS_ADDED",
    "ADDITIONAL_ITEMS_EXTENDED", "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
    "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "ENUM_ARRAY_EXTENDED", "COMBINED_TYPE_EXTENDED",
    "PRODUCT_TYPE_NARROWED", "SUM_TYPE_EXTENDED", "NOT_TYPE_NARROWED",
])

_ANNOTATIONS = {"$schema", "$id", "id", "title", "description", "default", "examples", "$comment", "definitions",
                "$defs", "readOnly", "writeOnly", "deprecated", "format", "contentEncoding", "contentMediaType"}
_COMBINERS = ("allOf", "anyOf", "oneOf")
_STRING_KEYS = {"minLength", "maxLength", "pattern"}
_NUMBER_KEYS = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
_OBJECT_KEYS = {"properties", "required", "additionalProperties", "patternProperties", "dependencies",
                "dependentRequired", "dependentSchemas", "minProperties", "maxProperties", "propertyNames"}
_ARRAY_KEYS = {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains"}
_CONDITIONAL_KEYS = ("if", "then", "else")


class JsonModel:
    """A JSON Schema document and the documents its references name (name -> document)."""

    def __init__(self, document, references: dict | None = None):
        self.document = document
        self.references = references or {}


class _Ctx:
    def __init__(self, depth: int = 0, active: set | None = None, budget: list | None = None):
        self.differences: list[tuple[str, str]] = []
        self.depth = depth
        self.active = active if active is not None else set()
        self.budget = budget if budget is not None else [MAX_COMPARISONS]

    def sub(self) -> _Ctx:
        return _Ctx(self.depth, self.active, self.budget)

    def add(self, kind: str, path: str) -> None:
        self.differences.append((kind, path))

    @property
    def compatible(self) -> bool:
        return all(kind in COMPATIBLE_CHANGES for kind, _ in self.differences)


class _Node:
    """A schema with the document and model its local $refs resolve in."""
    __slots__ = ("model", "root", "schema")

    def __init__(self, schema, root, model: JsonModel):
        self.schema, self.root, self.model = schema, root, model

    def child(self, schema) -> _Node:
        return _Node(schema, self.root, self.model)


def _pointer(document, fragment: str):
    target = document
    for part in [p for p in fragment.split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            return None
    return target


def _resolve(node: _Node) -> _Node:
    """Follow `$ref`s (at most 32 hops); an unresolvable one is "anything", as a missing schema is."""
    for _ in range(32):
        schema = node.schema
        if not (isinstance(schema, dict) and isinstance(schema.get("$ref"), str)):
            return node
        ref = schema["$ref"]
        base, _, fragment = ref.partition("#")
        if not base:
            target, root = _pointer(node.root, fragment), node.root
        else:
            document = node.model.references.get(base)
            if document is None:  # a reference named by a URL whose last segment is the subject's name
                tail = base.rstrip("/").rsplit("/", 1)[-1]
                document = next((d for name, d in node.model.references.items()
                                 if name.rstrip("/").rsplit("/", 1)[-1] == tail), None)
            target, root = (_pointer(document, fragment), document) if document is not None else (None, None)
        if target is None:
            return node.child({})
        node = _Node(target, root, node.model)
    return node.child({})


def _is_empty(schema) -> bool:
    return schema is True or (isinstance(schema, dict) and not (set(schema) - _ANNOTATIONS))


def _parts(schema: dict) -> list[tuple[str, object]]:
    """The everit-like shapes a schema object is made of: (shape, payload)."""
    parts: list[tuple[str, object]] = []
    keys = set(schema)
    base = {k: v for k, v in schema.items() if k not in _COMBINERS and k != "not" and k not in _CONDITIONAL_KEYS}
    types = schema.get("type")
    if "enum" in schema or "const" in schema:
        parts.append(("enum", schema))
    elif isinstance(types, list) and len(types) > 1:
        parts.append(("anyOf", [dict(base, type=t) for t in types]))
    elif types is not None:
        t = types[0] if isinstance(types, list) and types else types
        parts.append(("integer" if t == "integer" else str(t), base))
    elif keys & _OBJECT_KEYS:
        parts.append(("object", base))
    elif keys & _ARRAY_KEYS:
        parts.append(("array", base))
    elif keys & _STRING_KEYS:
        parts.append(("string", base))
    elif keys & _NUMBER_KEYS:
        parts.append(("number", base))
    for combiner in _COMBINERS:
        if isinstance(schema.get(combiner), list):
            parts.append((combiner, schema[combiner]))
    if "not" in schema:
        parts.append(("not", schema["not"]))
    if "if" in schema:
        parts.append(("if", schema))
    return parts


def _shape(node: _Node) -> tuple[str, object]:
    schema = node.schema
    if schema is False:
        return "false", None
    if _is_empty(schema) or not isinstance(schema, dict):
        return "empty", None
    parts = _parts(schema)
    if not parts:
        return "empty", None
    if len(parts) == 1:
        return parts[0]
    # several shapes in one object: everit combines them with allOf
    return "allOf", [_Part(kind, payload) for kind, payload in parts]


class _Part:
    """One shape of a multi-shape schema, kept as a schema of its own inside a synthetic allOf."""
    __slots__ = ("kind", "payload")

    def __init__(self, kind, payload):
        self.kind, self.payload = kind, payload


def _shape_of(node: _Node) -> tuple[str, object]:
    if isinstance(node.schema, _Part):
        return node.schema.kind, node.schema.payload
    return _shape(node)


def _class(kind: str) -> str:
    if kind == "integer":
        return "number"
    if kind in ("anyOf", "oneOf", "allOf"):
        return "combined"
    return kind


def json_differences(original: JsonModel, update: JsonModel) -> list[tuple[str, str]]:
    ctx = _Ctx()
    _compare(ctx, _Node(original.document, original.document, original),
             _Node(update.document, update.document, update), "#")
    return ctx.differences


def json_incompatibilities(original: JsonModel, update: JsonModel) -> list[str]:
    """Confluent-style messages for the incompatible differences of `update` against `original`."""
    seen, out = set(), []
    for kind, path in json_differences(original, update):
        if kind not in COMPATIBLE_CHANGES and (kind, path) not in seen:
            seen.add((kind, path))
            out.append(f"{{errorType:\"{kind}\", description:\"at path '{path}' the new schema differs "
                       f"from the old one in a way data of the old one may not be read\"}}")
    return out


def _compare(ctx: _Ctx, original: _Node | None, update: _Node | None, path: str) -> None:
    if original is None and update is None:
        return
    if original is None:
        ctx.add("SCHEMA_ADDED", path)
        return
    if update is None:
        ctx.add("SCHEMA_REMOVED", path)
        return
    if ctx.depth > MAX_DEPTH:
        return
    ctx.budget[0] -= 1
    if ctx.budget[0] < 0:
        # kafkapy's own: refused rather than compared for minutes (Confluent's has no such limit)
        ctx.add("SCHEMA_TOO_COMPLEX_TO_COMPARE", path)
        return
    original, update = _resolve(original), _resolve(update)
    pair = (id(original.schema), id(update.schema))
    if pair in ctx.active:  # a recursive schema already being compared further up
        return
    ctx.active.add(pair)
    ctx.depth += 1
    try:
        _compare_resolved(ctx, original, update, path)
    finally:
        ctx.depth -= 1
        ctx.active.discard(pair)


def _compare_resolved(ctx: _Ctx, original: _Node, update: _Node, path: str) -> None:
    o_kind, o_payload = _shape_of(original)
    u_kind, u_payload = _shape_of(update)
    o_class, u_class = _class(o_kind), _class(u_kind)
    if o_class != "combined" and u_class == "combined":
        subs = [update.child(s) for s in u_payload]
        if len(subs) == 1:
            sub = ctx.sub()
            _compare(sub, original, subs[0], path)
            if sub.compatible:
                ctx.differences += sub.differences
                return
        elif u_kind in ("anyOf", "oneOf"):
            for s in subs:
                sub = ctx.sub()
                _compare(sub, original, s, path)
                if sub.compatible:
                    ctx.differences += sub.differences
                    ctx.add("SUM_TYPE_EXTENDED", path)
                    return
    elif o_class == "combined" and u_class != "combined" and len(o_payload) == 1:
        sub = ctx.sub()
        _compare(sub, original.child(o_payload[0]), update, path)
        if sub.compatible:
            ctx.differences += sub.differences
            return
    if o_class != u_class:
        if o_class == "false" or u_class == "empty":
            return
        ctx.add("TYPE_CHANGED", path)
        return
    if isinstance(original.schema, dict) and isinstance(update.schema, dict):
        for key, kind in (("title", "TITLE_CHANGED"), ("description", "DESCRIPTION_CHANGED"),
                          ("default", "DEFAULT_CHANGED")):
            if original.schema.get(key) != update.schema.get(key):
                ctx.add(kind, path)
        if (original.schema.get("$id") or original.schema.get("id")) != (update.schema.get("$id")
                                                                        or update.schema.get("id")):
            ctx.add("ID_CHANGED", path)
    if o_class == "string":
        _compare_string(ctx, o_payload, u_payload, path)
    elif o_class == "number":
        _compare_number(ctx, o_kind, u_kind, o_payload, u_payload, path)
    elif o_class == "enum":
        _compare_enum(ctx, o_payload, u_payload, path)
    elif o_class == "combined":
        _compare_combined(ctx, original, update, o_kind, u_kind, o_payload, u_payload, path)
    elif o_class == "not":
        sub = ctx.sub()
        # reversed: what the new schema excludes must be excluded by the old one already
        _compare(sub, update.child(u_payload), original.child(o_payload), path + "/not")
        ctx.add("NOT_TYPE_NARROWED" if sub.compatible else "NOT_TYPE_EXTENDED", path + "/not")
    elif o_class == "if":
        _compare_conditional(ctx, original, update, o_payload, u_payload, path)
    elif o_class == "object":
        _compare_object(ctx, original, update, o_payload, u_payload, path)
    elif o_class == "array":
        _compare_array(ctx, original, update, o_payload, u_payload, path)


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _limit(ctx: _Ctx, key: str, original: dict, update: dict, path: str) -> None:
    name = re.sub(r"(?<!^)([A-Z])", r"_\1", key).upper()
    old, new = _number(original.get(key)), _number(update.get(key))
    if old == new:
        return
    where = f"{path}/{key}"
    if old is None:
        ctx.add(f"{name}_ADDED", where)
    elif new is None:
        ctx.add(f"{name}_REMOVED", where)
    elif old < new:
        ctx.add(f"{name}_INCREASED", where)
    else:
        ctx.add(f"{name}_DECREASED", where)


def _compare_string(ctx: _Ctx, original: dict, update: dict, path: str) -> None:
    _limit(ctx, "maxLength", original, update, path)
    _limit(ctx, "minLength", original, update, path)
    old, new = original.get("pattern"), update.get("pattern")
    if old != new:
        kind = "PATTERN_ADDED" if old is None else "PATTERN_REMOVED" if new is None else "PATTERN_CHANGED"
        ctx.add(kind, f"{path}/pattern")


def _compare_number(ctx: _Ctx, o_kind: str, u_kind: str, original: dict, update: dict, path: str) -> None:
    if o_kind != u_kind:
        ctx.add("TYPE_EXTENDED" if o_kind == "integer" else "TYPE_NARROWED", path)
    for key in ("maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum"):
        _limit(ctx, key, original, update, path)
    old, new = _number(original.get("multipleOf")), _number(update.get("multipleOf"))
    if old != new:
        where = f"{path}/multipleOf"
        if old is None:
            ctx.add("MULTIPLE_OF_ADDED", where)
        elif new is None:
            ctx.add("MULTIPLE_OF_REMOVED", where)
        elif new and _divides(new, old):
            ctx.add("MULTIPLE_OF_REDUCED", where)  # every multiple of the old is one of the new
        elif old and _divides(old, new):
            ctx.add("MULTIPLE_OF_EXPANDED", where)
        else:
            ctx.add("MULTIPLE_OF_CHANGED", where)


def _divides(small, big) -> bool:
    ratio = big / small
    return abs(ratio - round(ratio)) < 1e-9


def _enum_values(schema: dict) -> set[str]:
    values = schema["enum"] if isinstance(schema.get("enum"), list) else [schema.get("const")]
    return {json.dumps(v, sort_keys=True) for v in values}


def _compare_enum(ctx: _Ctx, original: dict, update: dict, path: str) -> None:
    old, new = _enum_values(original), _enum_values(update)
    if old == new:
        return
    kind = "ENUM_ARRAY_EXTENDED" if new >= old else "ENUM_ARRAY_NARROWED" if new <= old else "ENUM_ARRAY_CHANGED"
    ctx.add(kind, f"{path}/enum")


def _compare_combined(ctx, original: _Node, update: _Node, o_kind, u_kind, o_subs, u_subs, path) -> None:
    if o_kind != u_kind:
        if u_kind == "anyOf" or (u_kind == "oneOf" and len(o_subs) == 1) or \
                (u_kind == "allOf" and len(o_subs) == 1 and len(u_subs) == 1):
            ctx.add("COMBINED_TYPE_EXTENDED", path)
        else:
            ctx.add("COMBINED_TYPE_CHANGED", path)
            return
    olds = _distinct(o_subs)
    news = _distinct(u_subs)
    if len(olds) < len(news):
        ctx.add("PRODUCT_TYPE_EXTENDED" if u_kind == "allOf" else "SUM_TYPE_EXTENDED", path)
    elif len(olds) > len(news):
        ctx.add("PRODUCT_TYPE_NARROWED" if u_kind == "allOf" else "SUM_TYPE_NARROWED", path)
    edges: dict[int, dict[int, list]] = {}
    for i, o in enumerate(olds):
        for j, u in enumerate(news):
            sub = ctx.sub()
            _compare(sub, original.child(o), update.child(u), f"{path}/{o_kind}/{i}")
            if sub.compatible:
                edges.setdefault(i, {})[j] = sub.differences
    matching = _max_matching(edges, len(olds))
    for i, j in matching.items():
        ctx.differences += edges[i][j]
    if len(matching) < min(len(olds), len(news)):
        ctx.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED", path)


def _distinct(subs: list) -> list:
    out, seen = [], set()
    for s in subs:
        key = json.dumps(s, sort_keys=True, default=repr) if not isinstance(s, _Part) else id(s)
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


def _max_matching(edges: dict[int, dict[int, list]], left: int) -> dict[int, int]:
    """Maximum bipartite matching (augmenting paths; the branch lists are short)."""
    right_of: dict[int, int] = {}

    def augment(i: int, seen: set) -> bool:
        for j in edges.get(i, {}):
            if j in seen:
                continue
            seen.add(j)
            if j not in right_of or augment(right_of[j], seen):
                right_of[j] = i
                return True
        return False

    for i in range(left):
        augment(i, set())
    return {i: j for j, i in right_of.items()}


def _compare_conditional(ctx: _Ctx, original: _Node, update: _Node, o: dict, u: dict, path: str) -> None:
    # kafkapy's rule (Confluent's checker does not look inside if/then/else): the condition must stay
    # the same, and each branch is compared as a schema of its own
    if json.dumps(o.get("if"), sort_keys=True) != json.dumps(u.get("if"), sort_keys=True):
        ctx.add("TYPE_CHANGED", f"{path}/if")
        return
    for key in ("then", "else"):
        _compare(ctx, original.child(o.get(key, True)), update.child(u.get(key, True)), f"{path}/{key}")


def _extra(schema: dict, key: str):
    """(permits, schema-or-None) of additionalProperties/additionalItems; {} and true are 'open'."""
    value = schema.get(key, True)
    if value is False:
        return False, None
    if value is True or _is_empty(value) or not isinstance(value, dict):
        return True, None
    return True, value


def _object_open(schema: dict) -> bool:
    permits, extra = _extra(schema, "additionalProperties")
    return permits and extra is None and not schema.get("patternProperties")


def _partial_schema(schema: dict, name: str):
    patterns = schema.get("patternProperties")
    if isinstance(patterns, dict):
        for pattern, sub in patterns.items():
            try:
                if re.search(pattern, name):
                    return sub
            except re.error:
                continue
    return _extra(schema, "additionalProperties")[1]


def _has_default(node: _Node, schema) -> bool:
    resolved = _resolve(node.child(schema)).schema
    return isinstance(resolved, dict) and "default" in resolved


def _compare_object(ctx: _Ctx, original: _Node, update: _Node, o: dict, u: dict, path: str) -> None:
    o_props = o.get("properties") if isinstance(o.get("properties"), dict) else {}
    u_props = u.get("properties") if isinstance(u.get("properties"), dict) else {}
    o_req = set(o.get("required") or []) if isinstance(o.get("required"), list) else set()
    u_req = set(u.get("required") or []) if isinstance(u.get("required"), list) else set()
    for name in o_props:
        if name in u_props:
            where = f"{path}/required/{name}"
            if name in o_req and name not in u_req:
                ctx.add("REQUIRED_ATTRIBUTE_REMOVED", where)
            elif name in u_req and name not in o_req:
                ctx.add("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if _has_default(update, u_props[name])
                        else "REQUIRED_ATTRIBUTE_ADDED", where)
    for name in sorted(set(o_props) | set(u_props)):
        where = f"{path}/properties/{name}"
        if name not in u_props:
            if _object_open(u):
                ctx.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", where)
                continue
            partial = _partial_schema(u, name)
            if partial is not None:
                sub = ctx.sub()
                _compare(sub, original.child(o_props[name]), update.child(partial), where)
                ctx.differences += sub.differences
                ctx.add("PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible
                        else "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where)
            elif _resolve(original.child(o_props[name])).schema is False:
                ctx.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)
            else:
                ctx.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)
        elif name not in o_props:
            if _object_open(o):
                if _is_empty(_resolve(update.child(u_props[name])).schema):
                    ctx.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", where)
                else:
                    ctx.add("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where)
                continue
            partial = _partial_schema(o, name)
            if partial is not None:
                sub = ctx.sub()
                _compare(sub, original.child(partial), update.child(u_props[name]), where)
                ctx.differences += sub.differences
                ctx.add("PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible
                        else "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where)
            if name in u_req:
                ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL"
                        if _has_default(update, u_props[name])
                        else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where)
            else:
                ctx.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where)
        else:
            _compare(ctx, original.child(o_props[name]), update.child(u_props[name]), where)
    _compare_dependencies(ctx, original, update, o, u, path)
    where = f"{path}/additionalProperties"
    (o_permits, o_extra), (u_permits, u_extra) = _extra(o, "additionalProperties"), _extra(u, "additionalProperties")
    if o_permits != u_permits:
        ctx.add("ADDITIONAL_PROPERTIES_ADDED" if u_permits else "ADDITIONAL_PROPERTIES_REMOVED", where)
    elif o_extra is None and u_extra is not None:
        ctx.add("ADDITIONAL_PROPERTIES_NARROWED", where)
    elif o_extra is not None and u_extra is None:
        ctx.add("ADDITIONAL_PROPERTIES_EXTENDED", where)
    elif o_extra is not None:
        _compare(ctx, original.child(o_extra), update.child(u_extra), where)
    _limit(ctx, "maxProperties", o, u, path)
    _limit(ctx, "minProperties", o, u, path)


def _dependencies(schema: dict) -> tuple[dict, dict]:
    """(property -> required names, property -> schema): draft 4-7 `dependencies` and 2019's
    `dependentRequired` / `dependentSchemas`."""
    arrays, schemas = {}, {}
    for key in ("dependencies", "dependentRequired", "dependentSchemas"):
        value = schema.get(key)
        if not isinstance(value, dict):
            continue
        for prop, dep in value.items():
            if isinstance(dep, list):
                arrays[prop] = {d for d in dep if isinstance(d, str)}
            elif isinstance(dep, (dict, bool)):
                schemas[prop] = dep
    return arrays, schemas


def _compare_dependencies(ctx: _Ctx, original: _Node, update: _Node, o: dict, u: dict, path: str) -> None:
    (o_arrays, o_schemas), (u_arrays, u_schemas) = _dependencies(o), _dependencies(u)
    for prop in sorted(set(o_arrays) | set(u_arrays)):
        where = f"{path}/dependencies/{prop}"
        old, new = o_arrays.get(prop), u_arrays.get(prop)
        if new is None:
            ctx.add("DEPENDENCY_ARRAY_REMOVED", where)
        elif old is None:
            ctx.add("DEPENDENCY_ARRAY_ADDED", where)
        elif old != new:
            ctx.add("DEPENDENCY_ARRAY_EXTENDED" if new >= old else "DEPENDENCY_ARRAY_NARROWED" if new <= old
                    else "DEPENDENCY_ARRAY_CHANGED", where)
    for prop in sorted(set(o_schemas) | set(u_schemas)):
        where = f"{path}/dependencies/{prop}"
        if prop not in u_schemas:
            ctx.add("DEPENDENCY_SCHEMA_REMOVED", where)
        elif prop not in o_schemas:
            ctx.add("DEPENDENCY_SCHEMA_ADDED", where)
        else:
            _compare(ctx, original.child(o_schemas[prop]), update.child(u_schemas[prop]), where)


def _item_lists(schema: dict) -> tuple[object, list, str]:
    """(schema of every item or None, positional item schemas, the key of what comes after them)."""
    items = schema.get("items")
    if isinstance(schema.get("prefixItems"), list):  # 2020-12: prefixItems + items for the rest
        return None, schema["prefixItems"], "items"
    if isinstance(items, list):
        return None, items, "additionalItems"
    return items, [], "additionalItems"


def _compare_array(ctx: _Ctx, original: _Node, update: _Node, o: dict, u: dict, path: str) -> None:
    o_all, o_tuple, o_rest = _item_lists(o)
    u_all, u_tuple, u_rest = _item_lists(u)
    if o_all is not None or u_all is not None:
        _compare(ctx, original.child(o_all) if o_all is not None else None,
                 update.child(u_all) if u_all is not None else None, f"{path}/items")
    o_permits, o_extra = _extra(o, o_rest)
    u_permits, u_extra = _extra(u, u_rest)
    o_open, u_open = o_permits and o_extra is None, u_permits and u_extra is None
    for index in range(max(len(o_tuple), len(u_tuple))):
        where = f"{path}/items/{index}"
        if index < len(o_tuple) and index < len(u_tuple):
            _compare(ctx, original.child(o_tuple[index]), update.child(u_tuple[index]), where)
        elif index < len(o_tuple):
            if u_open:
                ctx.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", where)
            elif u_extra is not None:
                sub = ctx.sub()
                _compare(sub, original.child(o_tuple[index]), update.child(u_extra), where)
                ctx.differences += sub.differences
                ctx.add("ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible
                        else "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where)
            elif _resolve(original.child(o_tuple[index])).schema is False:
                ctx.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)
            else:
                ctx.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)
        else:
            if o_open:
                ctx.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
                        if _is_empty(_resolve(update.child(u_tuple[index])).schema)
                        else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL", where)
            elif o_extra is not None:
                sub = ctx.sub()
                _compare(sub, original.child(o_extra), update.child(u_tuple[index]), where)
                ctx.differences += sub.differences
                ctx.add("ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible
                        else "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where)
            else:
                ctx.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", where)
    if o_tuple or u_tuple or o_rest in o or u_rest in u:
        where = f"{path}/{u_rest}"
        if o_permits != u_permits:
            ctx.add("ADDITIONAL_ITEMS_REMOVED" if o_permits else "ADDITIONAL_ITEMS_ADDED", where)
        elif o_extra is None and u_extra is not None:
            ctx.add("ADDITIONAL_ITEMS_NARROWED", where)
        elif o_extra is not None and u_extra is None:
            ctx.add("ADDITIONAL_ITEMS_EXTENDED", where)
        elif o_extra is not None:
            _compare(ctx, original.child(o_extra), update.child(u_extra), where)
    _limit(ctx, "maxItems", o, u, path)
    _limit(ctx, "minItems", o, u, path)
    if bool(o.get("uniqueItems")) != bool(u.get("uniqueItems")):
        ctx.add("UNIQUE_ITEMS_REMOVED" if o.get("uniqueItems") else "UNIQUE_ITEMS_ADDED", f"{path}/uniqueItems")
