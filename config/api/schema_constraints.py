"""Constraints the API enforces that drf-spectacular does not write into the schema by itself.

A client generator (or schemathesis, tests/config/test_api_conformance.py) reads the schema as
the contract: a request it holds valid must be accepted, one it holds invalid refused. So each
rule the code applies is documented here rather than loosened in the code:

- no string holds NUL (``NO_NUL``): the JSON parser refuses it anywhere, keys included
  (``AnyJsonValue`` for free-form JSON);
- a text field that may not be blank is trimmed first (DRF's ``trim_whitespace``), so it needs
  a character that is not white space (``NOT_BLANK``); a JSON field that is not nullable says so;
- no query or path parameter may hold NUL (``NO_NUL``);
- an optional query parameter sent empty (``?agent=``) counts as not sent, everywhere in this
  API except the lists (``?status=`` is an invalid choice): ``allowEmptyValue: true``;
- a batch holds 1 to ``API_MAX_BATCH_ITEMS`` items;
- rules that tie fields together (``name`` or ``pr_number``; not ``ref`` and ``pr_number``) are
  declared on the input serializer as ``openapi_rules`` and merged into its request component.
"""

from django.conf import settings
from rest_framework import serializers

from config.api.fields import StrictSerializer

# Anything but NUL: the JSON parser (config/api/parsers.py) refuses it in every string and key,
# Django in query strings, PostgreSQL in text.
NO_NUL = r"^[^\x00]*$"
# No NUL, and a character that str.strip() keeps. Not a bare \S: Python's white space also holds
# U+001C-U+001F, which the Unicode White_Space of other regex engines (and validators) does not.
NOT_BLANK = r"^[^\x00]*[^\s\x1c-\x1f\x00][^\x00]*$"
ANY_JSON_REF = {"$ref": "#/components/schemas/AnyJsonValue"}
_JSON_OBJECT = {"type": "object", "additionalProperties": ANY_JSON_REF, "propertyNames": {"pattern": NO_NUL}}
_NON_NULL_JSON = [
    {"type": "string", "pattern": NO_NUL},
    {"type": "number"},
    {"type": "boolean"},
    {"type": "array", "items": ANY_JSON_REF},
    _JSON_OBJECT,
]
ANY_JSON_VALUE = {
    "description": "Any JSON value; no string or object key holds NUL (\\u0000).",
    "anyOf": [*_NON_NULL_JSON[:2], {"type": "boolean", "nullable": True}, *_NON_NULL_JSON[3:]],
}


def add_field_constraints(field, schema: dict, direction: str) -> None:
    """Add to ``schema`` (drf-spectacular's, validators included) what it leaves out of ``field``."""
    if direction != "request":
        return
    if isinstance(field, serializers.CharField) and schema.get("type") == "string":
        if "pattern" in schema or "format" in schema or "enum" in schema:
            return
        blank_refused = field.trim_whitespace and not field.allow_blank
        schema["pattern"] = NOT_BLANK if blank_refused else NO_NUL
    elif isinstance(field, serializers.JSONField | serializers.DictField):
        if schema.get("type") == "object":
            # A field that declares its keys and values (extend_schema_field with propertyNames, which
            # drf-spectacular never writes itself) keeps them; any other takes any JSON.
            if "propertyNames" not in schema:
                schema.update(_JSON_OBJECT)
        elif "type" not in schema and "anyOf" not in schema:
            # An empty schema admits null, which the field refuses unless allow_null (then nullable).
            schema["anyOf"] = _NON_NULL_JSON


def document_empty_query_values(result, generator, request, public):
    """Every optional query parameter of this API treats an empty value as absent."""
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []) if isinstance(operation, dict) else []:
                # Not the lists (?status=a&status=b): an empty item there is an invalid choice.
                schema = parameter.get("schema", {})
                if parameter.get("in") == "query" and not parameter.get("required") and schema.get("type") != "array":
                    parameter["allowEmptyValue"] = True
                if parameter.get("in") in ("query", "path") and schema.get("type") == "string":
                    # ApiJsonErrorsMiddleware refuses a NUL in the query string; the views (and the
                    # database) refuse it in path parameters.
                    schema.setdefault("pattern", NO_NUL)
    return result


# Request components that are one object or a batch (config.api.schema.one_or_batch).
BATCH_COMPONENTS: set[str] = set()


def _input_serializers(cls=None):
    for sub in (cls or StrictSerializer).__subclasses__():
        yield sub
        yield from _input_serializers(sub)


def _require_bodies_with_required_fields(result, components) -> None:
    # A body whose object has required fields cannot be left out: an empty request is a 400.
    def has_required(schema) -> bool:
        ref = schema.get("$ref", "")
        target = components.get(ref.rsplit("/", 1)[-1], {}) if ref else schema
        return bool(target.get("required")) or any(has_required(branch) for branch in target.get("oneOf", []))

    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            body = operation.get("requestBody") if isinstance(operation, dict) else None
            content = (body or {}).get("content", {}).get("application/json")
            if content and has_required(content.get("schema", {})):
                body["required"] = True


def document_serializer_rules(result, generator, request, public):
    """Merge each input serializer's ``openapi_rules`` into its request component, and its
    ``openapi_properties`` into the properties they name."""
    components = result.get("components", {}).get("schemas", {})
    components["AnyJsonValue"] = ANY_JSON_VALUE
    _require_bodies_with_required_fields(result, components)
    for name in BATCH_COMPONENTS & set(components):
        # config.api.views.incoming_items: an empty batch is a 400, a longer one a 413.
        for branch in components[name].get("oneOf", []):
            if branch.get("type") == "array":
                branch.update(minItems=1, maxItems=settings.API_MAX_BATCH_ITEMS)
    for serializer_class in _input_serializers():
        component = components.get(f"{serializer_class.__name__}Request")
        if component is None:
            continue
        component.update(getattr(serializer_class, "openapi_rules", {}))
        for name, extra in getattr(serializer_class, "openapi_properties", {}).items():
            component["properties"][name].update(extra)
    return result
