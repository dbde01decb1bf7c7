from django.apps import AppConfig


class BoardConfig(AppConfig):
    name = "board"
    verbose_name = "Board: tasks and campaigns"

    def ready(self) -> None:
        # The archive's retention asks board whether a worktree's tasks are done: workspaces may
        # not import board.
        from board.retention import worktree_retention_register

        worktree_retention_register()
