"""Base models and shared field types of :mod:`plugin.schemas`.

Requests are strict (:class:`Body`): a field of the wrong JSON type is refused, never coerced
(``"100"`` is no number), unknown fields are refused, and an optional field is left out rather
than sent as ``null``. Where a field has a rule of its own (a budget, a doc id, a tag), its
validator is the library's checker, which raises :class:`docanchor.errors.InvalidRequest` with
the sentence users already know; pydantic's own errors are turned into such sentences by
:mod:`plugin.schemas.validate`. Responses (:class:`Reply`) describe the fields DocAnchor sends and
allow more, so a field added later breaks no client.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema

from docanchor import formats
from docanchor.access import MAX_NAMESPACE_CHARS, check_namespace
from docanchor.library import (
    MAX_METADATA_BYTES,
    MAX_METADATA_KEYS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    WHERE_OPERATORS,
    check_doc_type,
    check_metadata,
    check_tags,
    check_where,
)
from docanchor.settings import MAX_BUDGET_TOKENS
from plugin.api import check_budget


def sent_fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """``model``'s fields by the names a body or tool call sends (aliases such as ``from``, not
    ``from_``), in order."""
    return {f.alias or key: f for key, f in model.model_fields.items()}


class Body(BaseModel):
    """A request body or query string: strict types, no unknown fields (the plugin tools tolerate
    them: why in :class:`plugin.schemas.tools.Args`)."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)


class Reply(BaseModel):
    """A response body: the fields listed, more allowed."""

    model_config = ConfigDict(extra="allow")


class Schema(GenerateJsonSchema):
    """pydantic's JSON Schema without what only clutters an API description: property titles
    and ``"default": null`` of fields that are simply optional."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def default_schema(self, schema: Any) -> dict[str, Any]:
        out = super().default_schema(schema)
        if out.get("default", 0) is None:
            out.pop("default")
        return out


Id = Annotated[str, Field(min_length=1, max_length=200)]
DocType = Annotated[Literal[formats.names()], BeforeValidator(check_doc_type), Field(  # type: ignore[valid-type]
    description="Only documents of this type: " + ", ".join(formats.names()) + ".")]
"""A ``doc_type`` filter: one of :func:`docanchor.formats.names` (the registry), else refused with
the list (a misspelt type would otherwise match nothing and look like an empty library)."""
DocId = Annotated[str, Field(min_length=1, max_length=200, description="A document id such as doc_0123456789abcdef.")]
def _namespace(value: object) -> object:
    """Raises: InvalidRequest ``invalid_namespace`` for a namespace that is not one by
    :func:`docanchor.access.check_namespace` (the one rule every door uses)."""
    check_namespace(value)
    return value


Namespace = Annotated[str, Field(min_length=1, max_length=MAX_NAMESPACE_CHARS), BeforeValidator(_namespace), Field(
    description="The namespace to work in (or the X-DocAnchor-Namespace header; both must agree).")]
# (constraints before a validator: pydantic renders those after it as unknown keywords)
Budget = Annotated[int, Field(ge=1, le=MAX_BUDGET_TOKENS), BeforeValidator(check_budget), Field(
    description="Budget tokens (cl100k_base by default) the answer may use.")]
Tags = Annotated[list[Annotated[str, Field(min_length=1, max_length=MAX_TAG_CHARS)]], Field(max_length=MAX_TAGS),
                 BeforeValidator(check_tags), Field(description=(
                     "Short labels, compared case-insensitively and stored lower-cased; no commas."))]
Scalar = str | int | float | bool
Metadata = Annotated[dict[str, Scalar], Field(max_length=MAX_METADATA_KEYS), BeforeValidator(check_metadata), Field(
    description=f"A flat JSON object of strings, numbers and booleans (at most {MAX_METADATA_KEYS} keys, "
                f"{MAX_METADATA_BYTES:,} bytes).")]
Where = Annotated[dict[str, Any], BeforeValidator(lambda v: (check_where(v), v)[1]), Field(
    description="Conditions on metadata, all of which must hold: {\"key\": value} (equal) or {\"key\": {op: value}} "
                f"with op one of {', '.join(WHERE_OPERATORS)} ($in/$nin take a list).")]
