"""The transaction a write made of one SQL statement runs in."""

from contextlib import AbstractContextManager, nullcontext

from django.db import transaction


def single_statement_atomic() -> AbstractContextManager:
    """None on PostgreSQL in autocommit outside any transaction: one statement is atomic by itself,
    and BEGIN and COMMIT would be two more round trips while its rows are locked. Anywhere else an
    atomic block: a savepoint inside a caller's transaction, so that a failed statement (a unique
    violation) leaves it usable; on SQLite the IMMEDIATE transaction that serialises writers."""
    connection = transaction.get_connection()
    if connection.vendor == "postgresql" and connection.get_autocommit() and not connection.in_atomic_block:
        return nullcontext()
    return transaction.atomic()
