import pytest
from django.db import connection


@pytest.mark.django_db
def test_sqlite_runs_in_wal_mode_with_immediate_transactions():
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone()[0] == "wal"
    assert connection.settings_dict["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
