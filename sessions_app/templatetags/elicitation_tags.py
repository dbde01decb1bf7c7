"""The form of an MCP elicitation, built from its requested schema (sessions_app/elicitations.py)."""

from django import template

from sessions_app.elicitations import elicitation_fields

register = template.Library()


@register.filter
def elicitation_form(payload: object) -> list[dict]:
    """The fields of an elicitation question's payload (its requested_schema, in its field_order)."""
    if not isinstance(payload, dict):
        return []
    return elicitation_fields(payload.get("requested_schema"), payload.get("field_order"))
