from rest_framework.permissions import BasePermission

from config.pages import user_groups, user_may

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


def view_allowed_groups(view) -> tuple[str, ...]:
    """The people's groups (config.pages) a view takes besides staff: its ``allowed_groups``
    attribute, by default none (the API is for agents and staff)."""
    return tuple(getattr(view, "allowed_groups", ()))


class IsAgentOrStaff(BasePermission):
    """Agents with a valid key holding a scope the view takes, or staff people signed in
    through the browser (and people of the groups the view takes)."""

    message = "Authenticate with an agent key (Authorization: Bearer <key>) or as a staff user."

    def has_permission(self, request, view) -> bool:
        user = request.user
        if user is None or not user.is_authenticated:
            return False
        if request_agent(request) is None:
            groups = view_allowed_groups(view)
            if user.is_staff or (groups and user_may(user, groups)):
                return True
            if groups:
                mine = " and ".join(sorted(user_groups(user))) or "no group"
                self.message = f"This endpoint is for staff and the {' or '.join(groups)} groups; you are in {mine}."
            return False
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
