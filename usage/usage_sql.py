"""An export's UsageRecord rows in one statement on PostgreSQL, not through bulk_create.

The OTLP receiver stores up to thousands of rows a request (issue 15's aim: half the batch events
endpoint's rate). bulk_create spends most of that request's CPU on them: each of the 17 fields of
each row prepared by its field, then 17 arrays of 1,000 values quoted one value at a time by
psycopg. Here the rows go as one JSON document that PostgreSQL reads into the table's own row type
(``json_populate_recordset``): one ``json.dumps``, one parameter. The statement is generated from
the model's fields (ledger/insert_sql.py), so a field added to UsageRecord is in it at once; the
values are those bulk_create would store (tests/usage/test_usage_sql.py compares both, row for
row). A conflict on (agent, idempotency_key) skips the row, as ``ignore_conflicts=True`` does.
ARCHITECTURE.md, "Fast paths", lists it; bench/HISTORY.md, "OTLP ingest (issue 15)", has the A/B.
"""

import datetime as dt
import json
from decimal import Decimal

from django.db import connection
from django.utils import timezone

from ledger.insert_sql import InsertSelect
from usage.models import UsageRecord

_TABLE = connection.ops.quote_name(UsageRecord._meta.db_table)
# Every column from the document, but received_at: one time for the statement, as the ORM stamps it.
_FIELDS = [field for field in UsageRecord._meta.concrete_fields if not field.primary_key]
_STATEMENT = InsertSelect(
    UsageRecord,
    source=f"json_populate_recordset(NULL::{_TABLE}, %s::json) AS r",
    exprs={
        field.attname: "%s" if field.attname == "received_at" else f"r.{connection.ops.quote_name(field.column)}"
        for field in _FIELDS
    },
)
SQL = _STATEMENT.sql + " ON CONFLICT DO NOTHING"
_GIVEN = [field for field in _FIELDS if field.attname != "received_at"]
ATTNAMES = [field.attname for field in _GIVEN]  # what a row gives, by the model's attribute names
_NAMES = [(field.attname, field.column) for field in _GIVEN]


def usage_records_insert(db, *, rows: list[dict]) -> None:
    """Insert rows (dicts of every ATTNAMES value), skipping those already stored."""
    # A row without one of the model's fields is a KeyError here, not a NULL stored.
    document = json.dumps([{column: row[name] for name, column in _NAMES} for row in rows], default=_json_value)
    params = _STATEMENT.params(db, expr_params={"received_at": [timezone.now()]}) + [document]
    with db.cursor() as cursor:
        cursor.execute(SQL, params)


def _json_value(value):
    # What json.dumps cannot write itself, as PostgreSQL's input functions read it back exactly.
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not a column value")
