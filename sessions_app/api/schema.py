"""Tell drf-spectacular how agent keys authenticate, so the schema documents it."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class AgentKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "sessions_app.api.authentication.AgentKeyAuthentication"
    name = "agentKey"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "An agent API key: `Authorization: Bearer sy_...`."}
