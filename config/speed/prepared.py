"""Statements PostgreSQL plans once per connection instead of on every call: the task claim's.

Django's psycopg cursors bind parameters on the client (the values are written into the SQL text),
so PostgreSQL parses and plans every statement afresh. For the claim (board/claim_sql.py: the pick,
the UPDATE, the claim row and the event in one statement) planning was half of PostgreSQL's CPU per
claim: 0.58 ms a claim on one connection, 0.28 ms prepared (bench/HISTORY.md, 2026-11-29).

Inside ``prepared_statements(db)`` the cursors Django opens on that connection bind on the server
and prepare what they run (psycopg's ``prepare=True``; each connection keeps its last 100). Only
statements whose text repeats belong here, and only ones whose plan does not hang on a value bound
as a parameter: a value a partial index's predicate names (a status) is written into the SQL, or
PostgreSQL re-plans every call with that value and nothing is saved.

Mirrors, in django/db/backends/postgresql/base.py of Django 5.2.19, ``DatabaseWrapper.create_cursor``:
an unnamed cursor is ``self.connection.cursor()``, so the psycopg connection's ``cursor_factory``
decides the cursor class. Django sets ``prepare_threshold`` to None unless OPTIONS names it; with
None psycopg prepares nothing, so the settings name it (config/env.py), and its ORM cursors, which
bind on the client, never prepare whatever it is. DATABASE_PREPARED_STATEMENTS=0 turns this off (for
a pooler in transaction mode that cannot keep prepared statements): the same statements then run
unprepared.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache


@cache
def _preparing_cursor() -> type:
    # Made on first use: importing Django's PostgreSQL backend imports psycopg (50-70 ms), which a
    # process on SQLite never needs.
    from django.db.backends.postgresql.base import ServerBindingCursor

    class PreparingCursor(ServerBindingCursor):
        def execute(self, query, params=None, *, prepare=None, binary=None):
            return super().execute(query, params, prepare=True if prepare is None else prepare, binary=binary)

    return PreparingCursor


@contextmanager
def prepared_statements(db) -> Iterator[None]:
    """Cursors opened on ``db`` (a Django connection) inside this block prepare their statements;
    a no-op off PostgreSQL. The block must hold only statements worth a plan kept per connection."""
    if db.vendor != "postgresql" or db.queries_logged:
        # Logged queries (DEBUG, a test capturing them) run as the ORM's do: Django's log reads the
        # SQL with its values off a client-binding cursor, and a prepared one has no such text.
        yield
        return
    db.ensure_connection()
    raw = db.connection
    saved = raw.cursor_factory
    raw.cursor_factory = _preparing_cursor()
    try:
        yield
    finally:
        raw.cursor_factory = saved
