from django.apps import AppConfig


class CompositionConfig(AppConfig):
    """The top layer: what uses several apps at once (the reaper, the demo set-up) and the wiring of
    lower apps' extension points. Every app may be imported from here and none imports it
    (ARCHITECTURE.md, Layers)."""

    name = "composition"
    verbose_name = "Composition: what spans several apps"

    def ready(self) -> None:
        from composition.session_wiring import session_hooks_register

        session_hooks_register()
