"""OpenAPI generation that says what the API really does: every operation documents the
JSON error answers it can give, and input objects refuse properties they do not name."""

from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

READ_ERRORS = ("400", "401", "403", "404", "429")
WRITE_ERRORS = ("400", "401", "403", "404", "409", "413", "415", "429")


class ErrorOutput(serializers.Serializer):
    message = serializers.CharField(help_text="What is wrong, for a person to read.")
    errors = serializers.JSONField(
        required=False,
        help_text="Per-field messages for invalid input: field name to a list of messages (nested for nested fields).",
    )


class SwitchyardAutoSchema(AutoSchema):
    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        codes = WRITE_ERRORS if self.method in ("POST", "PUT", "PATCH", "DELETE") else READ_ERRORS
        for code in codes:
            if code not in responses:
                responses[code] = self._get_response_for_code(ErrorOutput, code, direction=direction)
        return responses


def refuse_unknown_request_properties(result, generator, request, public):
    """Input serializers are strict (config.api.fields.StrictSerializer): say so in the schema."""
    for name, component in result.get("components", {}).get("schemas", {}).items():
        if name.endswith("Request") and component.get("type") == "object":
            component["additionalProperties"] = False
    return result


def one_or_batch(serializer_class: type[serializers.Serializer], name: str):
    """The request body of a batch endpoint: one object, or a list of at most 1,000."""
    from drf_spectacular.utils import PolymorphicProxySerializer

    return PolymorphicProxySerializer(
        component_name=name,
        serializers=[serializer_class, serializer_class(many=True, max_length=1000)],
        resource_type_field_name=None,
        many=False,
    )
