"""MkDocs hook: the docstrings' Sphinx roles read as plain code in the API reference.

The package's docstrings name other code as ``:meth:`append```, ``:class:`Store```
and the like (reST); mkdocstrings renders the role's name as text before the code.
This drops it (and a leading ``~``), leaving the name as code.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:meth|class|func|mod|data|attr|exc|obj):(<code>)~?")


def on_page_content(html: str, **_: Any) -> str:
    """Strip reST role prefixes from a built page's HTML."""
    return _ROLE.sub(r"\1", html)
