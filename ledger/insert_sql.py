"""An INSERT ... SELECT for one model, generated from its fields, for the fast paths that embed
a row's insert in a larger statement (a data-modifying CTE on PostgreSQL).

The columns are the model's concrete columns, every one but the primary key, in field order: a
field added to the model is in the fragment at once, with the value the ORM would give it when
the caller says nothing (its default, or now for auto_now/auto_now_add), converted as the ORM
converts it (``get_db_prep_save``). So a change to the model changes the fragment, instead of
breaking a hand-written copy on PostgreSQL only. tests/ledger/test_insert_sql.py pins each
fragment against its model and its table.

Generic, not about events: it lives here until the apps share a kernel below them.
"""

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from django.db import connection
from django.db.models import Model


class InsertSelect:
    """``INSERT INTO <table> (<columns>) SELECT <one expression per column> [FROM <source>]``.

    ``exprs`` maps a field (name or attname) to the SQL expression that computes it from the
    source row, e.g. ``{"subject_id": "id::text"}``; it may hold ``%s`` placeholders, whose
    values the caller passes to ``params`` in ``expr_params``. Every other column is a ``%s``
    filled by ``params``.
    """

    def __init__(self, model: type[Model], *, source: str = "", exprs: Mapping[str, str] | None = None, returning=""):
        self.model = model
        self.fields = [field for field in model._meta.concrete_fields if not field.primary_key]
        self._by_key = {field.name: field for field in self.fields} | {field.attname: field for field in self.fields}
        unknown = set(exprs or {}) - set(self._by_key)
        if unknown:
            raise ValueError(f"{model.__name__} has no concrete field {', '.join(sorted(unknown))}")
        self.exprs = {self._by_key[key].attname: sql for key, sql in (exprs or {}).items()}
        self.columns = [field.column for field in self.fields]
        self.select_list = [self.exprs.get(field.attname, "%s") for field in self.fields]
        quote = connection.ops.quote_name
        self.sql = (
            f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(quote(column) for column in self.columns)}) "
            f"SELECT {', '.join(self.select_list)}"
            + (f" FROM {source}" if source else "")
            + (f" RETURNING {returning}" if returning else "")
        )

    def params(
        self, db, values: Mapping[str, Any] | None = None, *, expr_params: Mapping[str, Sequence] | None = None
    ) -> list:
        """The parameters of ``sql``, in order. ``values``: a value per field that is not an
        expression (by name or attname; a related object stands for its pk); a field left out
        gets what the ORM's insert would give it. ``expr_params``: the values of an expression's
        placeholders. Unlike the ORM, a value given for an auto_now_add field is kept, so a fast
        path can stamp several rows with one time."""
        values = {self._key(key): _pk(value) for key, value in (values or {}).items()}
        expr_params = {self._key(key): list(given) for key, given in (expr_params or {}).items()}
        if stray := set(values) & set(self.exprs):
            raise ValueError(f"{', '.join(sorted(stray))}: computed by the fragment's SQL, not given")
        if stray := set(expr_params) - set(self.exprs):
            raise ValueError(f"{', '.join(sorted(stray))}: not an expression of this fragment")
        params = []
        for field in self.fields:
            if field.attname in self.exprs:
                params += expr_params.get(field.attname, [])
            elif field.attname in values:
                params.append(field.get_db_prep_save(values[field.attname], connection=db))
            else:
                params.append(field.get_db_prep_save(self._orm_default(field), connection=db))
        return params

    def _key(self, key: str) -> str:
        field = self._by_key.get(key)
        if field is None:
            raise ValueError(f"{self.model.__name__} has no concrete field {key}")
        return field.attname

    @staticmethod
    def _orm_default(field) -> Any:
        if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            return field.pre_save(SimpleNamespace(), add=True)  # now, as the ORM's insert stamps it
        return field.get_default()


def _pk(value: Any) -> Any:
    return value.pk if isinstance(value, Model) else value
