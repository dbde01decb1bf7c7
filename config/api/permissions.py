from rest_framework.permissions import BasePermission


def request_agent(request):
    """The Agent behind an API key, or None for a person's browser session."""
    return getattr(request.user, "agent", None)


class IsAgentOrStaff(BasePermission):
    """Agents with a valid key, or staff people signed in through the browser."""

    message = "Authenticate with an agent key (Authorization: Bearer <key>) or as a staff user."

    def has_permission(self, request, view) -> bool:
        user = request.user
        if user is None or not user.is_authenticated:
            return False
        return request_agent(request) is not None or user.is_staff
