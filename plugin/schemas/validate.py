"""A request body checked against its model, every refusal a sentence that names the field.

Unknown fields are refused first, naming them and the accepted ones
(:func:`plugin.bodies.refuse_unknown_fields`); then the model validates. A field's own checker
raises :class:`~docanchor.errors.InvalidRequest` itself; pydantic's errors are worded here from
the field's JSON Schema (what was expected, what arrived), e.g. ``'wait_s' must be a number from 0
to 60; got 99.``
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from docanchor.display import as_sent
from docanchor.errors import InvalidRequest
from plugin.bodies import refuse_unknown_fields
from plugin.schemas.common import Schema, sent_fields

M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], body: dict[str, Any], route: str) -> M:
    """``body`` as a ``model`` instance.

    Args:
        route: how messages name the route, e.g. ``"POST /v1/read"``.

    Raises:
        InvalidRequest: ``invalid_argument`` with ``details.field`` (or ``unknown``/``accepted``).
    """
    refuse_unknown_fields(body, tuple(sent_fields(model)), route)
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise refusal(model, exc.errors(include_url=False)[0]) from None


def refusal(model: type[BaseModel], error: dict[str, Any]) -> InvalidRequest:
    """One of pydantic's errors as the sentence a caller can act on."""
    loc = [str(p) for p in error.get("loc", ())]
    field = loc[0] if loc else ""
    if error.get("type") == "missing":
        return InvalidRequest(f"'{field}' is required.", code="invalid_argument", field=field)
    prop = model.model_json_schema(schema_generator=Schema, by_alias=True).get("properties", {}).get(field, {})
    where = field + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in loc[1:] if p not in _TYPE_NAMES)
    inner = prop.get("items", {}) if len(loc) > 1 and loc[1].isdigit() else prop
    return InvalidRequest(f"'{where}' must be {expected(inner)}; got {as_sent(error.get('input'))}.",
                          code="invalid_argument", field=field)


_TYPE_NAMES = {"str", "int", "float", "bool", "list", "dict", "function-before", "function-after"}


def expected(schema: dict[str, Any]) -> str:
    """What a JSON Schema accepts, in words (``a whole number from 1 to 1,000,000``)."""
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(v) for v in schema["enum"])
    kinds = [s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"]
    words = " or ".join(_one(s) for s in kinds) or "a value"
    return words


def _one(schema: dict[str, Any]) -> str:
    kind = schema.get("type")
    low, high = schema.get("minimum"), schema.get("maximum")
    if kind in ("integer", "number"):
        noun = "a whole number" if kind == "integer" else "a number"
        if low is not None and high is not None:
            return f"{noun} from {low:,} to {high:,}"
        return f"{noun} of at least {low:,}" if low is not None else noun
    if kind == "string":
        most = schema.get("maxLength")
        text = "a non-empty string" if schema.get("minLength", 0) >= 1 else "a string"
        return f"{text} (at most {most:,} characters)" if most else text
    if kind == "boolean":
        return "true or false"
    if kind == "array":
        item = _PLURALS.get(schema.get("items", {}).get("type"), "values")
        most = schema.get("maxItems")
        return f"a list of {item}" + (f" (at most {most})" if most else "")
    if kind == "object":
        return "a JSON object"
    return "a value"


_PLURALS = {"string": "strings", "integer": "whole numbers", "number": "numbers", "boolean": "booleans",
            "object": "objects"}
