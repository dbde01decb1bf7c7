from rest_framework.permissions import BasePermission

# Key scopes (sessions_app.models.AgentApiKey.Scope values, spelled out here so config does not
# import an app). An agent's work needs `agent` or `orchestrate`; a runner's key (`run` only)
# reaches only the endpoints that say they take it.
AGENT_SCOPES = frozenset({"agent", "orchestrate"})
RUNNER_SCOPES = frozenset({"run"})
ANY_SCOPE = AGENT_SCOPES | RUNNER_SCOPES


def request_agent(request):
    """The Agent behind an API key, or None for a person's browser session."""
    return getattr(request.user, "agent", None)


def view_allowed_scopes(view) -> frozenset[str]:
    """The key scopes a view takes: its ``allowed_scopes`` attribute (any one of them is enough),
    by default the agent scopes. Declared on the view, so which keys reach an endpoint is read
    where the endpoint is written, not in a list of URLs kept elsewhere."""
    return frozenset(getattr(view, "allowed_scopes", AGENT_SCOPES))


class IsAgentOrStaff(BasePermission):
    """Agents with a valid key holding a scope the view takes, or staff people signed in
    through the browser."""

    message = "Authenticate with an agent key (Authorization: Bearer <key>) or as a staff user."

    def has_permission(self, request, view) -> bool:
        user = request.user
        if user is None or not user.is_authenticated:
            return False
        if request_agent(request) is None:
            return user.is_staff
        allowed = view_allowed_scopes(view)
        scopes = set(getattr(request.auth, "scopes", None) or ())
        if scopes & allowed:
            return True
        # DRF makes a permission instance per request, so the message is this request's own.
        self.message = (
            f"This key's scopes ({', '.join(sorted(scopes)) or 'none'}) do not reach this endpoint: "
            f"it needs a key of scope {' or '.join(sorted(allowed))}."
        )
        return False
