"""PostgreSQL's word index: a stored tsvector column and its GIN index (revision 0014).

Revision 0001 indexed the expression ``to_tsvector('simple', LEFT(COALESCE(content,
''), 100000))``; the index held the lexemes but not the vector, so every
statement that ranked (``ts_rank``) or checked a phrase's positions re-parsed
the text of every match: most of a search's time at field size (issue #28).
``messages.content_tsv`` keeps the vector itself, so ranking and phrase
checks read the stored positions. A trigger of the server's
(:data:`VECTOR_TRIGGER`) sets it on every insert and every update of
``content``, so no writer, ours or anyone else's, can leave it stale; a
trigger rather than a generated column because adding a stored generated
column rewrites the whole table under an exclusive lock, while a plain
nullable column is added without touching a row and filled in batches that
writers never wait for (see :mod:`hermes_store.backends.postgresql.vector_fill`).

The GIN index keeps its name ``idx_messages_fts``: the health check and its
repair know it by that name.

What a word is (revision 0021): PostgreSQL's parser glues letters across
punctuation into one token (``src/state.db`` a file, ``a.b@c.io`` an email,
``v1.2`` a version, ``1.5`` a float, ``chat-send`` a compound beside its
parts), where FTS5's ``unicode61`` cuts at every character that is not a
letter or a number. A word index that keeps the glued token cannot answer a
search for a piece of it (``state``), nor the pieces of a path as FTS5 does,
so such a search fell to the substring route. The vector is now made from the
text with every ASCII punctuation character turned into a space first
(:data:`CUT_PATTERN`), so its lexemes are FTS5's tokens. The query side
offers a punctuated word both whole and as its pieces (:mod:`.tsquery`): the
pieces find it in the vector, the whole word lets ``ts_headline``, which
parses the untouched text, mark it.
"""

from __future__ import annotations

from collections.abc import Callable

WORD_INDEX_CHARS = 100_000
"""The vector covers the first this many characters (a tsvector cannot exceed 1 MB)."""

VECTOR_COLUMN = "content_tsv"


CUT_PATTERN = "[!-/:-@[-`{-~]"
"""Every ASCII punctuation character, as a regular expression's class of four ranges.

Where FTS5 cuts a word and PostgreSQL may glue one. A class of code point
ranges, not ``[[:punct:]]``, so what is cut does not depend on the server's
locale; one ``regexp_replace`` rather than ``translate``, which tests every
character of the text against every character of its list.
"""


def glued_vector_of(text: str) -> str:
    """The vector of revisions 0001 to 0020: PostgreSQL's parser on the text as it is."""
    return f"to_tsvector('simple', LEFT(COALESCE({text}, ''), {WORD_INDEX_CHARS}))"


def vector_of(text: str) -> str:
    """The SQL of ``text``'s vector (a column or ``NEW.content``): one spelling for all uses.

    The text's punctuation becomes spaces before the parser reads it, so the
    lexemes are the pieces FTS5 indexes (see the module's notes).
    """
    return (
        f"to_tsvector('simple', {cut_text(f'LEFT(COALESCE({text}, {EMPTY}), {WORD_INDEX_CHARS})')})"
    )


EMPTY = "''"


def cut_text(text: str) -> str:
    """``text`` with its punctuation made spaces, one for one: the same length, cut as FTS5 cuts.

    What the vector is made of, and what a snippet is marked on (the marks
    then go back onto the text as written, at the same places).
    """
    return f"regexp_replace({text}, '{CUT_PATTERN}', ' ', 'g')"


VECTOR_EXPRESSION = vector_of("content")
GLUED_VECTOR_EXPRESSION = glued_vector_of("content")

ADD_VECTOR_COLUMN = f"ALTER TABLE messages ADD COLUMN IF NOT EXISTS {VECTOR_COLUMN} tsvector"
"""A nullable column with no default: the server records it without touching a row."""
GENERATED_VECTOR_COLUMN = (
    f"ALTER TABLE messages ADD COLUMN IF NOT EXISTS {VECTOR_COLUMN} tsvector "
    f"GENERATED ALWAYS AS ({GLUED_VECTOR_EXPRESSION}) STORED"
)
"""The column as revision 0014 first made it (tests rebuild such a deployment with it)."""
DROP_VECTOR_EXPRESSION = f"ALTER TABLE messages ALTER COLUMN {VECTOR_COLUMN} DROP EXPRESSION"
"""Turn a generated column into a plain one keeping its values (revision 0020): no rewrite."""
IS_GENERATED = (
    "SELECT attgenerated = 's' FROM pg_attribute "
    f"WHERE attrelid = 'messages'::regclass AND attname = '{VECTOR_COLUMN}' AND NOT attisdropped"
)

VECTOR_FUNCTION = "messages_content_tsv"
VECTOR_TRIGGER = "messages_content_tsv"


def vector_function_body(vector: Callable[[str], str] = vector_of) -> str:
    """The trigger function's body (``prosrc``): the health check compares it with this."""
    return f" BEGIN NEW.{VECTOR_COLUMN} := {vector('NEW.content')}; RETURN NEW; END "


def vector_function_ddl(vector: Callable[[str], str] = vector_of) -> str:
    """Create or replace the trigger function that sets a row's vector by ``vector``."""
    return (
        f"CREATE OR REPLACE FUNCTION {VECTOR_FUNCTION}() RETURNS trigger LANGUAGE plpgsql "
        f"AS ${VECTOR_FUNCTION}${vector_function_body(vector)}${VECTOR_FUNCTION}$"
    )


VECTOR_FUNCTION_DDL = vector_function_ddl()
GLUED_VECTOR_FUNCTION_DDL = vector_function_ddl(glued_vector_of)
"""The function as revisions 0014 to 0020 made it (0021 replaces it; its downgrade restores it)."""
VECTOR_TRIGGER_DDL = (
    f"CREATE TRIGGER {VECTOR_TRIGGER} BEFORE INSERT OR UPDATE OF content ON messages "
    f"FOR EACH ROW EXECUTE FUNCTION {VECTOR_FUNCTION}()"
)
"""Every insert, and every update that names ``content``, gets the vector of its text."""
HAS_VECTOR_TRIGGER = (
    "SELECT EXISTS (SELECT 1 FROM pg_trigger "
    f"WHERE tgrelid = 'messages'::regclass AND tgname = '{VECTOR_TRIGGER}')"
)
DROP_VECTOR_TRIGGER = f"DROP TRIGGER IF EXISTS {VECTOR_TRIGGER} ON messages"
DROP_VECTOR_FUNCTION = f"DROP FUNCTION IF EXISTS {VECTOR_FUNCTION}()"
DROP_VECTOR_COLUMN = f"ALTER TABLE messages DROP COLUMN IF EXISTS {VECTOR_COLUMN}"

WORD_INDEX = "idx_messages_fts"
WORD_INDEX_DDL = f"CREATE INDEX {WORD_INDEX} ON messages USING GIN ({VECTOR_COLUMN})"
"""The index on the stored column (head)."""
NEW_WORD_INDEX = f"{WORD_INDEX}_vectors"
"""The name the index on the column is built under while the old expression index serves."""
EXPRESSION_INDEX_DDL = (
    f"CREATE INDEX {WORD_INDEX} ON messages USING GIN ({GLUED_VECTOR_EXPRESSION})"
)
"""Revision 0001's index on the expression, which a downgrade below 0014 puts back."""

ROLE_INDEX = "idx_messages_role"
ROLE_INDEX_DDL = f"CREATE INDEX IF NOT EXISTS {ROLE_INDEX} ON messages (role)"
"""A search's role filter as an index: the oldest rank window is filtered before it is read.

Without it a common phrase's older matches are read row by row to find the
few a ``role_filter`` passes; intersected with this index in the bitmap
first, only the rows of that role are read.
"""

VECTOR_INLINE = f"ALTER TABLE messages ALTER COLUMN {VECTOR_COLUMN} SET STORAGE MAIN"
"""Keep a message's vector in its row (revision 0019), compressed, its text moved out first.

A rank window tests ``content_tsv @@ query`` row by row, newest first, and
ranks the rows it keeps by their vectors. With the default storage
(``EXTENDED``) the server moves a large vector out of the row into the
TOAST table before the text, so each test of such a row read and
decompressed it from there; ``MAIN`` makes the text leave the row first
and the vector stay, so the test reads the row alone. Rows written before
the revision keep their storage until they are written again (see the
design notes, "Search at field size").
"""
VECTOR_EXTENDED = f"ALTER TABLE messages ALTER COLUMN {VECTOR_COLUMN} SET STORAGE EXTENDED"
