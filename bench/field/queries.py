"""The query classes of issue #19, with the words the field corpus gives them.

Each class is one way search can be expensive: a word in a third of all
messages (bm25 ranks every match before it can return twenty), two such
words, ``OR``, a prefix, a phrase, a word in twelve messages (fewer than a
page: the store then also asks the trigram index), a word in none, and the
CJK routes -- trigram ``MATCH`` for three or more characters, a ``LIKE`` scan
for two (frequent, and absent: the scan that never stops early), and Latin
glued to CJK. Each runs unfiltered and with a gateway's filters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .corpus import RARE_WORD
from .text import PATHS
from .words import NEVER_WRITTEN


@dataclass(frozen=True)
class QueryClass:
    key: str
    label: str
    query: str


CLASSES = (
    QueryClass("frequent", "frequent word", "error"),
    QueryClass("two_frequent", "two frequent words", "docker deployment"),
    QueryClass("or", "OR", "docker OR kubernetes"),
    QueryClass("prefix", "prefix", "deploy*"),
    QueryClass("phrase", "phrase", '"build failed"'),
    QueryClass("rare", "rare word", RARE_WORD),
    QueryClass("no_hit", "no hit", NEVER_WRITTEN[1]),
    QueryClass("file_name", "file name (dotted)", PATHS[7].rsplit("/", 1)[-1]),
    QueryClass("cjk3", "CJK 3+ chars (zh)", "服务端"),
    QueryClass("cjk3_ja", "CJK 3+ chars (ja)", "データベース"),
    QueryClass("cjk2", "CJK 2 chars (zh)", "问题"),
    QueryClass("cjk2_ko", "CJK 2 chars (ko)", "서버"),
    QueryClass("cjk2_none", "CJK 2 chars, no hit", NEVER_WRITTEN[0]),
    QueryClass("mixed", "Latin+CJK 3+ (trigram)", "docker 服务端"),
    QueryClass("mixed_short", "Latin+CJK 2 (LIKE)", "nginx 配置"),
)

FILTERS: dict[str, dict[str, Any]] = {
    "-": {},
    "src+role": {"source_filter": ["telegram", "discord"], "role_filter": ["user"]},
}
"""No filter, and a gateway's "my users' own words on these platforms"."""
