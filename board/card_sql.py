"""The card extras' subqueries compiled to SQL once per card query built (a fast path: ARCHITECTURE.md).

Issue 15's card extras put nine correlated subqueries into the board's card query (usage, budget
banner, run). Django compiles every expression of a query again each time the query runs, and for
the card read behind each push and each move's answer, compiling those nine cost far more than
running them (bench/card_read_bench.py; bench/HISTORY.md, "Against the commit before issue 14, every
figure"). Here each extra's expression is compiled once, by Django's own compiler on the connection the query will run on, and the card query
carries the result (``CompiledSQL``): the same SQL text, parameters and output field the ORM would
have used, so nothing is written by hand. ``board_task_list`` (board/selectors.py) builds the card query
once per thread and again when the extras or their day move, so the parameters (a day budget's
"since") are never stale. tests/board/test_card_sql.py runs the card query with and without this
on the same rows and compares the SQL, its parameters and every value, on both databases.
"""

from django.db import connection
from django.db.models import Expression

from board.models import Task


class CompiledSQL(Expression):
    """An expression already compiled: its SQL and parameters as they are (``RawSQL`` would add parentheses)."""

    def __init__(self, sql: str, params: tuple, output_field) -> None:
        super().__init__(output_field=output_field)
        self.sql, self.params = sql, params

    def as_sql(self, compiler, connection):
        return self.sql, self.params


def card_annotations_compiled(annotations: dict) -> dict:
    """``annotations`` (expressions on the task's row, by name) as SQL already compiled for this connection."""
    if not annotations:
        return {}
    query = Task.objects.annotate(**annotations).query  # resolved as in the card query: outer alias "board_task"
    compiler = query.get_compiler(connection=connection)
    compiled = {}
    for name in annotations:
        expression = query.annotations[name]
        sql, params = compiler.compile(expression)
        compiled[name] = CompiledSQL(sql, tuple(params), output_field=expression.output_field)
    return compiled
