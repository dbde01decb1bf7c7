from rest_framework import authentication, exceptions

from sessions_app.keys import api_key_authenticate


class AgentUser:
    """What ``request.user`` is for a request made with an agent key."""

    is_authenticated = True
    is_anonymous = False
    is_staff = False
    is_superuser = False

    def __init__(self, agent):
        self.agent = agent
        self.pk = None
        self.username = f"agent:{agent.slug}"

    def __str__(self) -> str:
        return self.username


class AgentKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request)
        if not header:
            return None
        parts = header.split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <key>'.")
        try:
            key = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid API key.") from None
        api_key = api_key_authenticate(key=key)
        if api_key is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
        return AgentUser(api_key.agent), api_key

    def authenticate_header(self, request) -> str:
        return self.keyword


# The schema's description of this class (drf-spectacular finds extensions by import). Here rather
# than in the app's ready(): every API view loads this module (DRF's default authentication), so the
# schema has it, and a process that serves no API (a Celery worker, a command) skips the 140 ms import.
from sessions_app.api import schema  # noqa: E402, F401
