from django.apps import AppConfig


class LedgerConfig(AppConfig):
    name = "ledger"
    verbose_name = "Ledger"

    def ready(self):
        # Request lines never carry credentials, whichever server writes them (config/log_filters.py).
        from config.log_filters import credentials_masking_install

        credentials_masking_install()
