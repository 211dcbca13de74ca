"""PostgreSQL's CJK pair index (revision 0018): SQLite's ``messages_cjk_bigrams``, kept by triggers.

pg_trgm cannot bound a CJK term well: its trigrams of Chinese text are
common, so a term's ``ILIKE`` walked the trigram index and then re-read and
re-tested every candidate row's text. The pair index is the one SQLite has
had since revision 0009 (:mod:`hermes_store.domain.bigrams`): one row per
distinct pair of adjacent CJK characters of a message, so a term of two or
more such characters is bounded by the messages under its rarest pair, read
newest first from the primary key ``(gram, message_id)``, and the ``ILIKE``
test decides on those alone (recall equal to the scan).

The pairs are cut in SQL: :data:`PAIRS_FUNCTION` finds the runs of CJK
characters with one regular expression (the character class is
:data:`hermes_store.domain.bigrams.GLOB_CLASS`, the same ranges) and takes
each pair inside a run, so a Latin message costs one regular-expression
scan, and the triggers' ``WHEN`` (any non-ASCII byte) spares it even that.
"""

from __future__ import annotations

from hermes_store.domain.bigrams import GLOB_CLASS

TABLE_NAME = "messages_cjk_bigrams"
PAIRS = "hermes_cjk_pairs"
KEEPER = "hermes_cjk_pairs_keep"

TABLE = f"""
CREATE TABLE IF NOT EXISTS {TABLE_NAME} (
    gram TEXT NOT NULL,
    message_id BIGINT NOT NULL,
    PRIMARY KEY (gram, message_id)
)
"""

PAIRS_FUNCTION = f"""
CREATE OR REPLACE FUNCTION {PAIRS}(content TEXT) RETURNS SETOF TEXT
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT DISTINCT substr(runs.run, step.n, 2)
    FROM (SELECT (regexp_matches(content, '{GLOB_CLASS}{{2,}}', 'g'))[1] AS run) AS runs
    CROSS JOIN LATERAL generate_series(1, length(runs.run) - 1) AS step(n)
$$
"""
"""The distinct CJK pairs of a text (the same as :func:`hermes_store.domain.bigrams.grams`)."""

KEEPER_FUNCTION = f"""
CREATE OR REPLACE FUNCTION {KEEPER}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.content IS NOT NULL THEN
        DELETE FROM {TABLE_NAME}
        WHERE message_id = OLD.id AND gram IN (SELECT {PAIRS}(OLD.content));
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.content IS NOT NULL THEN
        INSERT INTO {TABLE_NAME} (gram, message_id)
        SELECT pair, NEW.id FROM {PAIRS}(NEW.content) AS pair
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END
$$
"""

_NON_ASCII = "octet_length({row}.content) > length({row}.content)"
TRIGGERS = {
    "messages_cjk_pairs_insert": (
        f"AFTER INSERT ON messages FOR EACH ROW WHEN ({_NON_ASCII.format(row='NEW')})"
    ),
    "messages_cjk_pairs_delete": (
        f"AFTER DELETE ON messages FOR EACH ROW WHEN ({_NON_ASCII.format(row='OLD')})"
    ),
    "messages_cjk_pairs_update": (
        "AFTER UPDATE OF id, content ON messages FOR EACH ROW WHEN "
        f"({_NON_ASCII.format(row='OLD')} OR {_NON_ASCII.format(row='NEW')})"
    ),
}
"""Each trigger's timing and condition; all run :data:`KEEPER_FUNCTION`."""

BACKFILL = f"""
INSERT INTO {TABLE_NAME} (gram, message_id)
SELECT pair, m.id FROM messages m CROSS JOIN LATERAL {PAIRS}(m.content) AS pair
WHERE {_NON_ASCII.format(row="m")}
ON CONFLICT DO NOTHING
"""
"""The rows already there, in one statement (the triggers keep every later write)."""


def create_statements() -> list[str]:
    """The DDL of the index, its triggers and the back-fill, in order."""
    triggers = [
        f"CREATE OR REPLACE TRIGGER {name} {when} EXECUTE FUNCTION {KEEPER}()"
        for name, when in TRIGGERS.items()
    ]
    return [TABLE, PAIRS_FUNCTION, KEEPER_FUNCTION, *triggers, BACKFILL, f"ANALYZE {TABLE_NAME}"]


def drop_statements() -> list[str]:
    """The DDL that takes the index away again."""
    triggers = [f"DROP TRIGGER IF EXISTS {name} ON messages" for name in TRIGGERS]
    return [
        *triggers,
        f"DROP FUNCTION IF EXISTS {KEEPER}()",
        f"DROP FUNCTION IF EXISTS {PAIRS}(TEXT)",
        f"DROP TABLE IF EXISTS {TABLE_NAME}",
    ]
