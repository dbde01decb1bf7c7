"""OpenAPI generation that says what the API really does: every operation documents the
JSON error answers it can give, and input objects refuse properties they do not name."""

from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

from config.api.errors import LEASE_LOST
from config.api.schema_constraints import BATCH_COMPONENTS, add_field_constraints

READ_ERRORS = ("400", "401", "403", "404", "429")
WRITE_ERRORS = ("400", "401", "403", "404", "409", "413", "415", "429")


class ErrorOutput(serializers.Serializer):
    message = serializers.CharField(help_text="What is wrong, for a person to read.")
    code = serializers.CharField(
        required=False, help_text="A machine-readable reason, where a client may act on it (e.g. lease_lost)."
    )
    errors = serializers.JSONField(
        required=False,
        help_text="Per-field messages for invalid input: field name to a list of messages (nested for nested fields).",
    )


class LeaseLostOutput(ErrorOutput):
    """A 409 body; with ``code: lease_lost`` the agent's claim was taken back for want of a heartbeat."""

    code = serializers.ChoiceField(
        choices=[LEASE_LOST],
        required=False,
        help_text="lease_lost: your claim (task or worktree lease) was taken back because Switchyard heard "
        "nothing from you in time; nothing was changed. Claim it again. Absent for other conflicts.",
    )
    task = serializers.IntegerField(required=False, help_text="The task whose claim was lost.")
    worktree = serializers.IntegerField(required=False, help_text="The worktree whose lease was lost.")
    lost_at = serializers.DateTimeField(required=False, help_text="When it was taken back.")
    ttl_seconds = serializers.IntegerField(required=False, help_text="HEARTBEAT_TTL_SECONDS: the silence allowed.")
    reason = serializers.CharField(required=False, help_text="Why the worktree lease ended.")
    lease_expires_at = serializers.DateTimeField(required=False, help_text="When the worktree lease ran out.")


def lease_lost_response(description: str):
    from drf_spectacular.utils import OpenApiResponse

    return OpenApiResponse(LeaseLostOutput, description=description)


class SwitchyardAutoSchema(AutoSchema):
    # The constraints drf-spectacular leaves out (config/api/schema_constraints.py), added once it
    # has written the field's own validators; the direction is kept for them, as only input is trimmed.
    def _map_basic_serializer(self, serializer, direction):
        self._direction = direction
        return super()._map_basic_serializer(serializer, direction)

    def _insert_field_validators(self, field, schema):
        super()._insert_field_validators(field, schema)
        add_field_constraints(field, schema, getattr(self, "_direction", "response"))

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

    BATCH_COMPONENTS.add(f"{name}Request")

    return PolymorphicProxySerializer(
        component_name=name,
        serializers=[serializer_class, serializer_class(many=True)],
        resource_type_field_name=None,
        many=False,
    )


def one_or_batch_output(serializer_class, batch_class, name: str):
    """The 200/201 body of a batch endpoint: the item for one object, the per-item results for a batch."""
    from drf_spectacular.utils import PolymorphicProxySerializer

    return PolymorphicProxySerializer(
        component_name=name, serializers=[serializer_class, batch_class], resource_type_field_name=None, many=False
    )
