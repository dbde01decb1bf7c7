from django.apps import AppConfig


class RunnersConfig(AppConfig):
    name = "runners"
    verbose_name = "Runners: processes that start the agents"
