"""PostgreSQL's word index: a stored tsvector column and its GIN index (revision 0014).

Revision 0001 indexed the expression ``to_tsvector('simple', LEFT(COALESCE(content,
''), 100000))``; the index held the lexemes but not the vector, so every
statement that ranked (``ts_rank``) or checked a phrase's positions re-parsed
the text of every match: most of a search's time at field size (issue #28).
``messages.content_tsv`` keeps the vector itself, computed by the server on
every insert and update (a generated column: no trigger to forget, nothing a
writer of ours or anyone else's can leave stale), so ranking and phrase
checks read the stored positions.

The column is the same expression the old index had, so the old index's
matches, and what a word means, do not change. The GIN index keeps its name
``idx_messages_fts``: the health check and its repair know it by that name.
"""

from __future__ import annotations

WORD_INDEX_CHARS = 100_000
"""The vector covers the first this many characters (a tsvector cannot exceed 1 MB)."""

VECTOR_COLUMN = "content_tsv"
VECTOR_EXPRESSION = f"to_tsvector('simple', LEFT(COALESCE(content, ''), {WORD_INDEX_CHARS}))"

ADD_VECTOR_COLUMN = (
    f"ALTER TABLE messages ADD COLUMN IF NOT EXISTS {VECTOR_COLUMN} tsvector "
    f"GENERATED ALWAYS AS ({VECTOR_EXPRESSION}) STORED"
)
DROP_VECTOR_COLUMN = f"ALTER TABLE messages DROP COLUMN IF EXISTS {VECTOR_COLUMN}"

WORD_INDEX = "idx_messages_fts"
WORD_INDEX_DDL = f"CREATE INDEX {WORD_INDEX} ON messages USING GIN ({VECTOR_COLUMN})"
"""The index on the stored column (head)."""
EXPRESSION_INDEX_DDL = f"CREATE INDEX {WORD_INDEX} ON messages USING GIN ({VECTOR_EXPRESSION})"
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
