from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "usage"
    verbose_name = "Usage: tokens and cost from OpenTelemetry"

    def ready(self) -> None:
        # Cards show usage through board's extension point: board may not import usage.
        from usage.pages.cards import card_usage_register

        card_usage_register()
        # Budgets stop claims and tool uses through board's and the ledger's gates (usage/budgets.py).
        from usage.budgets import budget_gates_register

        budget_gates_register()
        from usage.budget_pages import card_budget_register

        card_budget_register()
