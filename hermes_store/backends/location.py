"""Where the store lives: ``$HERMES_HOME/state.db`` unless told otherwise.

Resolution happens at call time, never at import, so a process that changes
``HERMES_HOME`` (tests, worktree agents) gets the file it asked for.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from hermes_store.errors import InvalidInputError

URL_ENV = "HERMES_STORE_URL"
HOME_ENV = "HERMES_HOME"
DB_FILENAME = "state.db"


def hermes_home() -> Path:
    """The agent's home folder: ``$HERMES_HOME`` or ``~/.hermes``."""
    configured = os.environ.get(HOME_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".hermes"


def default_db_path() -> Path:
    return hermes_home() / DB_FILENAME


def sqlite_url(path: str | os.PathLike[str]) -> URL:
    return URL.create("sqlite", database=os.fspath(Path(path).expanduser()))


def resolve_url(target: str | os.PathLike[str] | URL | None = None) -> URL:
    """Turn a path, a URL string, or nothing into the URL of the store.

    Order: the explicit argument, then ``$HERMES_STORE_URL``, then the
    default file. A plain path (anything without ``://``) is a SQLite file;
    a bare ``postgresql://`` URL uses psycopg 3, the driver of the extra.
    """
    if target is None:
        env_url = os.environ.get(URL_ENV)
        return _parsed(env_url, f"${URL_ENV}") if env_url else sqlite_url(default_db_path())
    if isinstance(target, URL):
        return _with_driver(target)
    if not isinstance(target, str | os.PathLike):
        raise InvalidInputError(
            f"the store must be a path, a URL or None, got {type(target).__name__}"
        )
    text = os.fspath(target)
    if not isinstance(text, str):
        raise InvalidInputError("the store's path must be text, not bytes")
    if "\x00" in text:
        raise InvalidInputError("the store's path or URL holds a NUL character")
    if "://" in text:
        return _parsed(text, "the store URL")
    return sqlite_url(text)


def _parsed(text: str, what: str) -> URL:
    """``text`` as a URL; an unreadable one is refused without echoing it (it may hold a
    password)."""
    _refuse_blank_options(text, what)
    try:
        return _with_driver(make_url(text))
    except (ArgumentError, ValueError) as error:
        scheme = text.split("://", 1)[0]
        raise InvalidInputError(f"{what} ({scheme}://...) is not a valid URL: {error}") from None


def _refuse_blank_options(text: str, what: str) -> None:
    """``?pool_mode=`` with no value would be dropped by the URL parser, silently: an
    option written but not in effect. Refused, naming the option."""
    _, _, query = text.partition("?")
    for pair in filter(None, query.split("&")):
        name, equals, value = pair.partition("=")
        if equals and not value:
            raise InvalidInputError(
                f"{what} sets {name}= with no value; give the option a value or leave it out"
            )


def _with_driver(url: URL) -> URL:
    """``postgresql://`` means psycopg 3 here (SQLAlchemy's default would be psycopg2)."""
    return url.set(drivername="postgresql+psycopg") if url.drivername == "postgresql" else url


def sqlite_file(url: URL) -> Path | None:
    """The file behind a SQLite URL, or None for other backends and memory databases."""
    if url.get_backend_name() != "sqlite":
        return None
    database = url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)
