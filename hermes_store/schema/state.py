"""Which schema a database holds, read without Alembic: the check every open makes.

Opening a store asks "is this file current?" before anything else. On a
current file (the normal case) that answer must cost one cheap read -- no
Alembic import, no reflection, no write lock -- so this module depends on
SQLAlchemy alone; :mod:`hermes_store.schema.migrate` brings Alembic in only when
there is something to migrate.

``schema_version`` is a number space shared with the Hermes agent's own
store (``hermes_state.py``), which went on from the design document's
version 6 to 7, 8, ... 25 with meanings of its own (7 is "messages gained
``reasoning_content``"). A state.db moves between the two programs, so our
revisions never write a number above the document's 6: what we add beyond
the document (the trigram index of revision 0007, ...) is known by the
Alembic revision alone, and ``schema_version`` stays 6. A file whose
``schema_version`` is 7 or more was moved on by the agent's own code; it
is used as it is (see :mod:`hermes_store.backends.layout`) and never migrated here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import cast

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from hermes_store.backends.options import READ_OPTION
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.errors import SchemaError

DOCUMENT_VERSION = 6
"""The last ``schema_version`` the design document defines: the highest we ever write."""
HEAD_SCHEMA_VERSION = DOCUMENT_VERSION
"""``schema_version`` of a file at our head revision."""
HEAD_REVISION = "0021"

REVISION_VERSIONS = {
    "0001": 1,
    "0002": 2,
    "0003": 3,
    "0004": 4,
    "0005": 5,
    "0006": 6,
    "0007": 6,
    "0008": 6,
    "0009": 6,
    "0010": 6,
    "0011": 6,
    "0012": 6,
    "0013": 6,
    "0014": 6,
    "0015": 6,
    "0016": 6,
    "0017": 6,
    "0018": 6,
    "0019": 6,
    "0020": 6,
    "0021": 6,
}
"""The ``schema_version`` each of our revisions leaves behind."""

HISTORIC_STAMPS = frozenset({("0007", 7)})
"""(revision, schema_version) pairs older hermes_store releases wrote.

Revision 0007 used to stamp ``schema_version = 7``, a number the agent's
store gives another meaning; revision 0008 takes it back to 6. Until then
such a file is ours, not one the agent's code moved on.
"""


class Ladder(enum.Enum):
    """Whose version steps govern a file."""

    EMPTY = "empty"
    """No store yet: nothing of ours, nothing of the agent's."""
    OURS = "ours"
    """The design document's versions 1..6 and our Alembic revisions."""
    AGENT = "agent"
    """The agent's own versions 7 and later: used as it is, never migrated here."""


@dataclass(frozen=True)
class SchemaState:
    """What the version tables say, and the SQLite schema cookie beside them."""

    version: int | None
    revision: str | None
    cookie: int | None = None
    """``PRAGMA schema_version``: changes with any DDL, so a layout read once stays valid
    for as long as it does not move (None off SQLite)."""

    @property
    def ladder(self) -> Ladder:
        """Raises :class:`SchemaError` for a state this package cannot read safely."""
        return ladder_of(self.version, self.revision)

    @property
    def at_head(self) -> bool:
        """A file of ours at the head revision: nothing to migrate, the standard layout."""
        return (self.version, self.revision) == (HEAD_SCHEMA_VERSION, HEAD_REVISION)

    @property
    def needs_migration(self) -> bool:
        """Our ladder (or an empty file) below head; an agent file never needs one here."""
        return self.ladder is not Ladder.AGENT and not self.at_head


def revision_for_version(version: int) -> str:
    """The revision an old-code file at ``schema_version`` ``version`` is adopted as."""
    if version < 1:
        raise SchemaError(f"schema_version {version} is not a schema version (they start at 1)")
    if version > DOCUMENT_VERSION:
        raise SchemaError(
            f"schema_version {version} is the Hermes agent's own schema, not one of the "
            f"design document's (1..{DOCUMENT_VERSION}): such a file is used as it is, "
            "never adopted or migrated by hermes_store"
        )
    return f"{version:04d}"


def version_for_revision(revision: str) -> int:
    """The ``schema_version`` a database at our ``revision`` holds."""
    try:
        return REVISION_VERSIONS[revision]
    except KeyError:
        raise SchemaError(
            f"alembic revision {revision!r} is not one this hermes_store knows "
            f"(0001..{HEAD_REVISION}); the database was migrated by a newer version "
            "of hermes_store: upgrade hermes_store instead of the database"
        ) from None


def ladder_of(version: int | None, revision: str | None) -> Ladder:
    """Classify a file by its version tables; refuse what cannot be read safely.

    A ``schema_version`` of 7 or more is the agent's, whatever Alembic
    revision the file also carries (ours, if hermes_store wrote it before the
    agent's code moved it on) -- except a pair an older hermes_store wrote
    itself (:data:`HISTORIC_STAMPS`). Within the document's range an unknown
    revision means a newer hermes_store, whose steps we would not know.
    """
    if version is not None and (revision, version) not in HISTORIC_STAMPS:
        if version < 1:
            raise SchemaError(f"schema_version {version} is not a schema version (they start at 1)")
        if version > DOCUMENT_VERSION:
            return Ladder.AGENT
    if revision is not None:
        version_for_revision(revision)  # raises for a revision we do not know
    if version is None and revision is None:
        return Ladder.EMPTY
    return Ladder.OURS


_STATE_TABLES = ("schema_version", "alembic_version")
_VERSION = text("SELECT MAX(version) FROM schema_version")
_REVISION = text("SELECT version_num FROM alembic_version")
# SQLite answers all three in one statement when both tables exist (every
# current file), run on the driver: the open of a current file pays for
# nothing else. A missing table is an error that leaves the transaction usable.
_ALL_SQLITE = (
    "SELECT (SELECT MAX(version) FROM schema_version), "
    "(SELECT version_num FROM alembic_version), "
    "(SELECT schema_version FROM pragma_schema_version)"
)
_COOKIE_SQLITE = "PRAGMA schema_version"


def read_schema_state(connection: Connection) -> SchemaState:
    """The version tables as stored (None where absent) and, on SQLite, the schema cookie.

    Only reads, so it can run on a ``hermes_read`` connection without taking
    the write lock. A ``schema_version`` that is not a whole number is a
    :class:`SchemaError`: no program of ours wrote it.
    """
    if connection.dialect.name == "sqlite":
        # SQLAlchemy types the driver's connection as Any | None (any driver, maybe
        # detached); a connection in use to a SQLite file always has its sqlite3 one.
        dbapi_connection = cast(sqlite3.Connection, connection.connection.driver_connection)
        try:
            version, revision, cookie = dbapi_connection.execute(_ALL_SQLITE).fetchone()
        except sqlite3.OperationalError as error:
            if getattr(error, "sqlite_errorcode", None) != sqlite3.SQLITE_ERROR:
                raise  # not a missing table: the file itself failed
            # a table is missing: an old, empty or foreign file, asked table by table below
        else:
            return SchemaState(_version_number(version), revision, int(cookie))
    present = {name for name in _STATE_TABLES if connection.dialect.has_table(connection, name)}
    version = revision = None
    if "schema_version" in present:
        version = _version_number(connection.execute(_VERSION).scalar())
    if "alembic_version" in present:
        revision = connection.execute(_REVISION).scalar()
    cookie = None
    if connection.dialect.name == "sqlite":
        cookie = int(connection.exec_driver_sql(_COOKIE_SQLITE).scalar_one())
    return SchemaState(version, revision, cookie)


def _version_number(raw: object) -> int | None:
    """The stored ``schema_version`` as an int; SchemaError for ``'abc'`` and the like."""
    if raw is None:
        return None
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    raise SchemaError(
        f"schema_version holds {raw!r}, not a schema version number: the file was not "
        "written by the Hermes store (or was changed by hand); refusing to guess its schema"
    )


def read_state(connection: Connection) -> tuple[int | None, str | None]:
    """(``schema_version``, Alembic revision) as stored; None where absent."""
    state = read_schema_state(connection)
    return state.version, state.revision


def check_known(version: int | None, revision: str | None) -> Ladder:
    """Refuse a database this package cannot classify, before anything touches it."""
    return ladder_of(version, revision)


def is_current_on(connection: Connection) -> bool:
    """True when nothing is to be migrated: our head, or a file of the agent's own ladder."""
    return not read_schema_state(connection).needs_migration


def is_current(engine: Engine) -> bool:
    """:func:`is_current_on` in a read-only transaction of its own.

    Deciding that nothing is to be done must neither write nor wait for a writer.
    """
    with engine.connect().execution_options(**{READ_OPTION: True}) as connection:
        return is_current_on(connection)


_TABLE_NAMES = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"


def refuse_foreign_file(connection: Connection, where: str) -> None:
    """Refuse a SQLite file that holds tables but none of a session store's.

    Called only for a file without ``schema_version`` or ``alembic_version``
    (an empty file, normally): building the store's tables beside someone
    else's would turn an unrelated database into a half session store. A
    ``sessions`` table without a version is refused too: its schema cannot
    be told.
    """
    names = sorted(set(connection.exec_driver_sql(_TABLE_NAMES).scalars()) - set(_STATE_TABLES))
    if not names:  # empty, or only our own version tables left (a downgrade to base)
        return
    if "sessions" in names:
        raise SchemaError(
            f"{where} has a sessions table but no schema_version row and no "
            "alembic_version; refusing to guess which schema it has"
        )
    shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
    raise SchemaError(
        f"{where} is not a Hermes session store: it holds other tables ({shown}) "
        "and none of the store's; nothing was changed"
    )


def file_is_current(path: str) -> bool | None:
    """Is the SQLite file at ``path`` a store to go on with (ours at head, or the agent's)?

    Read-only; None when it cannot tell.

    Asked of a file that replaced the store's under it, before the store
    connects to it: connecting would set WAL mode, a write to a file that
    may not be ours at all.
    """
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        version, revision, _cookie = connection.execute(_ALL_SQLITE).fetchone()
    except sqlite3.OperationalError as error:
        return False if "no such table" in str(error) else None
    except sqlite3.DatabaseError:
        return False  # not a database, or damaged: not one to write into
    finally:
        connection.close()
    try:
        state = SchemaState(_version_number(version), revision)
        # Ours at head, or the agent's own ladder (read in its layout by the next unit).
        return state.at_head or state.ladder is Ladder.AGENT
    except SchemaError:
        return False
