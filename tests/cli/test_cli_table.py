"""The plain-text tables of ``sessions`` and ``search``: aligned, fitted, never markup.

:mod:`hermes_store.cli.table` draws what rich drew for these two
listings without importing rich (start-up, issue #19). Each check renders a
table for a stream that is not a terminal and looks at the text: every line
as wide as the table, CJK counted two columns, cells wrapped at words and
folded past their width, styles only when color is forced.
"""

from __future__ import annotations

import io
import unicodedata

import pytest

from hermes_store.cli.table import search_table, sessions_table


def _columns(line: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in line)


def _session(n: int, preview: str, title: str | None = None) -> dict[str, object]:
    return {
        "id": f"s{n}",
        "title": title,
        "source": "cli",
        "model": "anthropic/claude-sonnet-4.6",
        "preview": preview,
        "last_active": 1_700_000_000.0 + n,
        "message_count": 1234 * n,
    }


@pytest.fixture(autouse=True)
def _no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("COLUMNS", raising=False)


def test_every_line_is_as_wide_as_the_table_with_cjk_counted_twice() -> None:
    rows = [_session(1, "部署服务端的时候出错了 " * 3), _session(2, "docker deployment")]
    text = sessions_table(rows, io.StringIO())
    body = text.splitlines()[1:]  # the title is not boxed
    assert {_columns(line) for line in body} == {_columns(body[0])}
    assert "部署服务端的时候出错了" in text and "1,234" in text and "2,468" in text


def test_a_narrow_terminal_wraps_the_preview_first_and_loses_no_word(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    words = "the build fails because /var/lib/docker/overlay2/abcdefghijklmnopqrstuvwxyz is full"
    text = sessions_table([_session(1, words)], io.StringIO())
    body = text.splitlines()[1:]
    assert max(_columns(line) for line in body) <= 100
    assert {_columns(line) for line in body} == {_columns(body[0])}
    preview = "".join(line.split("│")[5].strip() + " " for line in body[3:-1])
    shown = preview.replace(" ", "")
    assert shown == words.replace(" ", ""), "every character, in order, folded or wrapped"
    assert len(body) > 5, "the preview took more than one line"


def test_markup_and_markers_are_text_without_color_and_styles_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hit = {
        "session_id": "[bold]s1[/bold]",
        "role": "user",
        "source": "cli",
        "timestamp": 1_700_000_000.0,
        "snippet": "my >>>docker<<< build [red]x[/red]",
    }
    plain = search_table([hit], "docker", 0, io.StringIO())
    assert "[bold]s1[/bold]" in plain and "[red]x[/red]" in plain
    assert "my docker build" in plain and ">>>" not in plain and "\x1b[" not in plain
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("FORCE_COLOR", "1")
    colored = search_table([hit], "docker", 2, io.StringIO())
    assert "\x1b[1;30;43mdocker\x1b[0m" in colored and ">>>" not in colored
    assert "1 hit(s) for 'docker', #3–#3" in colored


def test_a_piped_table_is_160_columns_at_most() -> None:
    rows = [_session(n, "word " * 200) for n in range(3)]
    body = sessions_table(rows, io.StringIO()).splitlines()[1:]
    assert {_columns(line) for line in body} == {160}
