from django.apps import AppConfig


class WorkspacesConfig(AppConfig):
    name = "workspaces"
    verbose_name = "Workspaces"

    def ready(self) -> None:
        # A session opens in a workspace of ours; sessions_app, below us, asks through its provider.
        from sessions_app.session_hooks import session_workspace_provider_register
        from workspaces.files.services import workspace_create_for_session, workspace_discard_empty, workspace_shared

        session_workspace_provider_register(
            shared=workspace_shared, create=workspace_create_for_session, discard=workspace_discard_empty
        )
