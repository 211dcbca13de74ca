"""Hot-path statements: compiled once per process, run straight on the sqlite3 connection.

An agent appends a message, bumps a counter or reads a session many times a
second, and on an embedded SQLite file the database work for such a call is a
few tens of microseconds. SQLAlchemy's ``Connection.execute`` adds a cache-key
walk, an execution context and a result object to every call, which is more
than the work itself. A :class:`Prepared` statement is still built with Core
(one definition of the SQL, checked against the models), but it is compiled
once per process and, on SQLite, executed directly on the DBAPI connection of
the unit of work -- inside the same transaction, so ``BEGIN IMMEDIATE``, the
retry budget and rollback on error behave exactly as for any other statement.
The sqlite3 module keeps its own prepared-statement cache per connection, so
repeated calls skip SQLite's parser as well.

Other dialects (PostgreSQL) go through ``Connection.execute`` unchanged: a
network round trip dwarfs the Python overhead there, and SQLAlchemy's type
handling for psycopg is worth keeping. Driver errors are re-raised as
SQLAlchemy's exception classes either way, so callers catch one family.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, cast

from sqlalchemy import Executable, Insert, Integer, literal_column
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement

from hermes_store.backends.sqlite.library import driver as sqlite3


@dataclass(frozen=True)
class _SqliteForm:
    """The statement as sqlite3 takes it: qmark SQL and how to order the parameters."""

    sql: str
    values: Callable[[Mapping[str, Any]], tuple[Any, ...]]
    """The parameters in SQL order, picked out of the call's mapping in one C call."""
    processors: tuple[tuple[int, Any], ...]
    """(position, bind processor) where the type has one (a REAL column's to_float)."""
    fixed: dict[str, Any]  # values the statement carries itself (the 0 of a COALESCE)


class Prepared:
    """One Core statement, compiled on first use, executed with the least overhead.

    ``column_keys`` fixes the columns of an INSERT whose VALUES come from the
    parameters (every call then supplies all of them, None where absent).
    ``order`` names the parameters in the order :meth:`last_rowid` receives
    their values; compiling checks that SQLite's placeholders follow it.
    """

    __slots__ = ("_column_keys", "_order", "_sqlite", "statement")

    def __init__(
        self,
        statement: Executable,
        column_keys: Sequence[str] | None = None,
        order: Sequence[str] | None = None,
    ) -> None:
        self.statement = statement
        self._column_keys = list(column_keys) if column_keys is not None else None
        self._order = tuple(order) if order is not None else None
        self._sqlite: _SqliteForm | None = None

    # -- execution -------------------------------------------------------
    def rows(self, connection: Connection, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """All result rows as tuples, in the statement's column order."""
        if connection.dialect.name != "sqlite":
            return [tuple(row) for row in connection.execute(self.statement, dict(params))]
        return self._run_sqlite(connection, params).fetchall()

    def dicts(self, connection: Connection, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """All result rows as plain dicts keyed by column name."""
        if connection.dialect.name != "sqlite":
            result = connection.execute(self.statement, dict(params)).mappings()
            return [dict(row) for row in result]
        cursor = self._run_sqlite(connection, params)
        keys = [column[0] for column in cursor.description]
        return [dict(zip(keys, row, strict=True)) for row in cursor.fetchall()]

    def first(self, connection: Connection, params: Mapping[str, Any]) -> dict[str, Any] | None:
        found = self.dicts(connection, params)
        return found[0] if found else None

    def scalar(self, connection: Connection, params: Mapping[str, Any]) -> Any:
        """The first column of the first row, or None when there is no row."""
        found = self.rows(connection, params)
        return found[0][0] if found else None

    def rowcount(self, connection: Connection, params: Mapping[str, Any]) -> int:
        """Run a DML statement; how many rows it changed."""
        if connection.dialect.name != "sqlite":
            return int(connection.execute(self.statement, dict(params)).rowcount)
        return int(self._run_sqlite(connection, params).rowcount)

    def inserted_id(self, connection: Connection, params: Mapping[str, Any]) -> int:
        """Run a one-row INSERT; the primary key the row got.

        On SQLite that is the cursor's ``lastrowid``: an ``INSERT ... RETURNING``
        costs SQLite a result buffer and the driver a fetch, inside the write
        lock, for a value it already has. Elsewhere the id comes back with the
        row (``RETURNING id`` on PostgreSQL).
        """
        if connection.dialect.name != "sqlite":
            statement = self.statement
            if not isinstance(statement, Insert):
                raise TypeError("inserted_id needs an INSERT statement")
            returning = statement.returning(literal_column("id", Integer))
            return int(connection.execute(returning, dict(params)).scalar_one())
        rowid = self._run_sqlite(connection, params).lastrowid
        assert rowid is not None  # set by every INSERT run on the cursor
        return rowid

    def last_rowid(self, connection: Connection, values: Sequence[Any]) -> int:
        """SQLite only: run an INSERT given its values in ``order``; the last row's id.

        A batch INSERT of many rows would otherwise build a mapping of every
        value only for it to be picked apart again in the same order.
        """
        if connection.dialect.name != "sqlite" or self._order is None:
            raise TypeError("last_rowid needs SQLite and a statement prepared with an order")
        form = self._sqlite or self._compile_sqlite(connection.dialect)
        rowid = self._execute_sqlite(connection, form, values).lastrowid
        assert rowid is not None  # set by every INSERT run on the cursor
        return rowid

    # -- SQLite ----------------------------------------------------------
    def _run_sqlite(self, connection: Connection, params: Mapping[str, Any]) -> sqlite3.Cursor:
        form = self._sqlite or self._compile_sqlite(connection.dialect)
        if form.fixed:
            params = {**form.fixed, **params}
        values = form.values(params)
        if form.processors:
            return self._execute_sqlite(connection, form, values)
        # The common case inline: no processor, the driver reached without a call
        # (what ``_driver_of`` does), one call to it.
        pool_connection = connection._dbapi_connection  # noqa: SLF001
        if pool_connection is None:
            pool_connection = connection.connection
        driver: sqlite3.Connection = pool_connection.dbapi_connection  # type: ignore[assignment]
        try:
            return driver.execute(form.sql, values)
        except connection.dialect.loaded_dbapi.Error as error:  # looked up only on a failure
            raise driver_error(connection.dialect, form.sql, values, error) from error

    @staticmethod
    def _execute_sqlite(
        connection: Connection, form: _SqliteForm, values: Sequence[Any]
    ) -> sqlite3.Cursor:
        if form.processors:
            values = list(values)
            for position, process in form.processors:
                values[position] = process(values[position])
        try:
            return _driver_of(connection).execute(form.sql, values)
        except connection.dialect.loaded_dbapi.Error as error:  # looked up only on a failure
            raise driver_error(connection.dialect, form.sql, values, error) from error

    def _compile_sqlite(self, dialect: Dialect) -> _SqliteForm:
        statement = self.statement
        assert isinstance(statement, ClauseElement)
        compiled = statement.compile(dialect=dialect, column_keys=self._column_keys)
        assert isinstance(compiled, SQLCompiler)
        if not compiled.positional or compiled.positiontup is None:
            raise TypeError(f"SQLite compiles positionally, not as {dialect.paramstyle}")
        names = tuple(compiled.positiontup)
        if self._order is not None and names != self._order:
            raise TypeError("the statement's placeholders do not follow the given order")
        binds = [compiled.binds[name] for name in names]
        processors = tuple(
            (position, process)
            for position, bind in enumerate(binds)
            if (process := bind.type.dialect_impl(dialect).bind_processor(dialect)) is not None
        )
        fixed = {
            name: bind.effective_value
            for name, bind in zip(names, binds, strict=True)
            if not bind.required
        }
        self._sqlite = _SqliteForm(compiled.string, _picker(names), processors, fixed)
        return self._sqlite


def _driver_of(connection: Connection) -> sqlite3.Connection:
    """The sqlite3 connection under ``connection``, reconnecting it if it was invalidated.

    The pool's ``dbapi_connection`` is the driver's own connection for
    sqlite3 (only async drivers wrap it). The Connection's pool connection is
    read as the attribute it is while it is there; only an invalidated
    Connection (the attribute None) goes through SQLAlchemy's ``connection``
    property, which reconnects it -- the property costs a function call on
    every statement otherwise.
    """
    pool_connection = connection._dbapi_connection  # noqa: SLF001
    if pool_connection is None:
        pool_connection = connection.connection
    return cast(sqlite3.Connection, pool_connection.dbapi_connection)


def driver_error(
    dialect: Dialect, statement: str, params: Sequence[Any], error: Exception
) -> DBAPIError:
    """A driver error of a statement run on the driver, as SQLAlchemy's exception class.

    Invalidation and the rest of SQLAlchemy's error handling are not needed for
    a file database; callers only need the one family of exception classes.
    """
    wrapped = DBAPIError.instance(statement, params, error, dialect.loaded_dbapi.Error)
    assert isinstance(wrapped, DBAPIError)  # what ``instance`` makes of a driver's error
    return wrapped


def _picker(names: tuple[str, ...]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """``params -> (params[name], ...)`` in order; a lone itemgetter would return a bare value."""
    if not names:
        return lambda _params: ()
    if len(names) == 1:
        pick = itemgetter(names[0])
        return lambda params: (pick(params),)
    return itemgetter(*names)
