"""The transaction a write made of one SQL statement runs in."""

from contextlib import AbstractContextManager, nullcontext

from django.db import transaction


def single_statement_commits() -> bool:
    """True on PostgreSQL in autocommit outside any transaction: a statement sent now commits by
    itself (SQLite's writers need the IMMEDIATE transaction that serialises them)."""
    connection = transaction.get_connection()
    return connection.vendor == "postgresql" and connection.get_autocommit() and not connection.in_atomic_block


def single_statement_atomic() -> AbstractContextManager:
    """None where a single statement commits by itself (single_statement_commits): one statement is
    atomic, and BEGIN and COMMIT would be two more round trips while its rows are locked. Anywhere
    else an atomic block: a savepoint inside a caller's transaction, so that a failed statement (a
    unique violation) leaves it usable; on SQLite the IMMEDIATE transaction that serialises writers."""
    return nullcontext() if single_statement_commits() else transaction.atomic()
