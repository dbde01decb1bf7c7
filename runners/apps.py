from django.apps import AppConfig


class RunnersConfig(AppConfig):
    name = "runners"
    verbose_name = "Runners: processes that start the agents"

    def ready(self) -> None:
        # Cards show a task's run through board's extension point: board may not import runners.
        from runners.pages.cards import card_run_register

        card_run_register()
        # A task with an active run is its run's: claims leave it alone (board's claim conditions).
        from runners.task_claims import run_claim_condition_register

        run_claim_condition_register()
        # An orchestrate key reads the sessions of runs (sessions_app's read grants).
        from runners.session_reads import run_session_reads_register

        run_session_reads_register()
        # A waiting run resumes when its session's question is answered (sessions_app's status hooks).
        from runners.run_waiting import run_waiting_register

        run_waiting_register()
