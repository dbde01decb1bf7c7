"""What-if settings for A/B runs of bench/run.py (--settings bench.settings_noredact); not used by the app.

Production settings with redaction turned off, to measure what it costs in the same run: the
settings module is imported before any module that binds ``redact_json`` / ``redact_text``
(sessions_app/api/fast.py, config/api/redacted_fields.py, ledger/services.py), so they bind these.
"""

import config.redaction as _redaction
from config.settings.production import *  # noqa: F403

_redaction.redact_json = lambda value: value
_redaction.redact_text = lambda text: text
