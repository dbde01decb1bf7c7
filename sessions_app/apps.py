from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Agents and sessions"

    def ready(self) -> None:
        # Registers the system check that keeps demo passwords out of production.
        from config import demo_passwords  # noqa: F401
