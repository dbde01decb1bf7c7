from django.apps import AppConfig


class LedgerConfig(AppConfig):
    name = "ledger"
    verbose_name = "Ledger"

    def ready(self):
        from config.domain_events import domain_event_writer_register
        from config.log_filters import credentials_masking_install
        from ledger.events import event_record

        # Request lines never carry credentials, whichever server writes them (config/log_filters.py).
        credentials_masking_install()
        # Apps below ledger (sessions_app) record their events through the kernel's port.
        domain_event_writer_register(writer=event_record)
