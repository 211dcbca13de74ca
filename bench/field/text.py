"""The text of a field-size state.db: prose, code, logs, tool calls, CJK.

Search cost depends on what the text is like: how many messages a common
word matches (a Zipf-like vocabulary of ~40,000 words, so the top words are
in a third of all messages and the tail in a handful), what unicode61 makes
of identifiers, paths and JSON (``user_service.py``, ``\\nStep``), and runs of
Chinese or Japanese that it cannot split at all. Everything here is drawn
from a caller's ``random.Random``, so a seed fixes the text; the pools
(vocabulary tail, identifiers, paths) are fixed by constants of their own.
Speed matters as much as realism -- a million messages are written in about
a minute -- so words are drawn in bulk with ``random.choices``.
"""

from __future__ import annotations

import json
import random
from functools import cache
from itertools import accumulate

from . import words as W

TAIL_SIZE = 40_000
"""Synthetic words after the English head: the vocabulary's long tail."""
ZIPF_SHIFT = 2.7
"""Zipf-Mandelbrot offset: keeps "the" from being every other word."""
ZIPF_EXPONENT = 1.1


def _tail(size: int, seed: int = 1919) -> list[str]:
    """``size`` pronounceable made-up words, none of them a head or reserved word."""
    rng = random.Random(seed)
    taken = set(W.HEAD_WORDS)
    words: list[str] = []
    while len(words) < size:
        word = "".join(
            rng.choice(W.ONSETS) + rng.choice(W.VOWELS) + rng.choice(W.CODAS)
            for _ in range(rng.choice((1, 2, 2, 2, 3)))
        )
        if word in taken or any(never in word for never in W.NEVER_WRITTEN):
            continue
        taken.add(word)
        words.append(word)
    return words


def _zipf(count: int) -> list[float]:
    return list(accumulate((rank + ZIPF_SHIFT) ** -ZIPF_EXPONENT for rank in range(count)))


VOCABULARY = W.HEAD_WORDS + _tail(TAIL_SIZE)
_CUM = _zipf(len(VOCABULARY))


def _identifiers(count: int, seed: int = 2024) -> list[str]:
    rng = random.Random(seed)
    words = W.CODE_WORDS
    found: dict[str, None] = {}
    while len(found) < count:
        parts = rng.sample(words, rng.choice((2, 2, 3)))
        style = rng.random()
        if style < 0.55:
            name = "_".join(parts)
        elif style < 0.85:
            name = parts[0] + "".join(p.capitalize() for p in parts[1:])
        else:
            name = "".join(p.capitalize() for p in parts)
        found[name] = None
    return list(found)


def _paths(count: int, identifiers: list[str], seed: int = 2025) -> list[str]:
    rng = random.Random(seed)
    found: dict[str, None] = {}
    while len(found) < count:
        dirs = rng.sample(W.DIRS, rng.choice((1, 2, 2, 3)))
        stem = rng.choice(identifiers).lower()
        found["/".join(dirs) + "/" + stem + rng.choice(W.EXTENSIONS)] = None
    return list(found)


IDENTIFIERS = _identifiers(5_000)
PATHS = _paths(3_000, IDENTIFIERS)
_ID_CUM = _zipf(len(IDENTIFIERS))
_PATH_CUM = _zipf(len(PATHS))


def _zh_tail(count: int, seed: int = 3030) -> list[str]:
    rng = random.Random(seed)
    found: dict[str, None] = dict.fromkeys(W.ZH_WORDS)
    chars = W.ZH_CHARS
    while len(found) < len(W.ZH_WORDS) + count:
        found["".join(rng.choice(chars) for _ in range(rng.choice((2, 2, 2, 3))))] = None
    return list(found)


ZH_VOCABULARY = _zh_tail(6_000)
_ZH_CUM = _zipf(len(ZH_VOCABULARY))
_JA_CUM = _zipf(len(W.JA_WORDS))
_KO_CUM = _zipf(len(W.KO_WORDS))

if any(c in W.ZH_CHARS + "".join(ZH_VOCABULARY) for c in W.NEVER_WRITTEN[0]):
    raise RuntimeError("the no-hit CJK query could be written")

_LEVELS = ("INFO", "INFO", "INFO", "DEBUG", "WARNING", "ERROR")
_ERRORS = ("ValueError", "KeyError", "TimeoutError", "ConnectionError", "RuntimeError")
_SERVICES = ("api", "worker", "gateway", "db", "redis", "nginx", "scheduler", "web")


class _Draws:
    """Weighted draws in bulk: ``random.choices`` costs little per item, much per call."""

    def __init__(self, rng: random.Random, population: list[str], cum: list[float]) -> None:
        self._rng = rng
        self._population = population
        self._cum = cum
        self._buffer: list[str] = []
        self._at = 0
        self._size = 32  # doubles up to 4096: a short session draws few words it never uses

    def _refill(self, count: int) -> None:
        self._size = min(4096, self._size * 2)
        k = max(count, self._size)
        self._buffer = self._rng.choices(self._population, cum_weights=self._cum, k=k)
        self._at = 0

    def take(self, count: int) -> list[str]:
        if self._at + count > len(self._buffer):
            self._refill(count)
        start = self._at
        self._at += count
        return self._buffer[start : self._at]

    def one(self) -> str:
        if self._at >= len(self._buffer):
            self._refill(1)
        self._at += 1
        return self._buffer[self._at - 1]


class TextWriter:
    """Draws every kind of text the corpus holds from one ``random.Random``."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self._random = rng.random
        self._choices = rng.choices
        self.words = _Draws(rng, VOCABULARY, _CUM).take
        self.ident = _Draws(rng, IDENTIFIERS, _ID_CUM).one
        self.path = _Draws(rng, PATHS, _PATH_CUM).one

    def prose(self, count: int) -> str:
        """About ``count`` words in sentences of 4-18, now and then a path or identifier."""
        rng = self.rng
        sentences = []
        left = max(1, count)
        while left > 0:
            n = min(left, rng.randint(4, 18))
            left -= n
            words = self.words(n)
            if n > 5 and self._random() < 0.25:
                words[rng.randrange(n)] = self.path() if self._random() < 0.5 else self.ident()
            words[0] = words[0].capitalize()
            sentences.append(" ".join(words) + rng.choice("....?!:"))
        return " ".join(sentences)

    def reasoning(self, count: int) -> str:
        """About ``count`` words of thinking, from a fixed pool of sentences (never searched)."""
        pool = _sentence_pool()
        out: list[str] = []
        words = 0
        while words < count:
            sentence, n = pool[int(self._random() * len(pool))]
            out.append(sentence)
            words += n
        return " ".join(out)

    def sized_prose(self, low: int, high: int) -> str:
        """Prose whose length is log-uniform-ish between ``low`` and ``high`` words."""
        return self.prose(int(low * (high / low) ** self._random()))

    # -- CJK ---------------------------------------------------------------
    def cjk(self, lang: str, units: int) -> str:
        """About ``units`` words of Chinese, Japanese or Korean, Latin words glued in."""
        rng = self.rng
        out = []
        left = max(1, units)
        while left > 0:
            n = min(left, rng.randint(4, 14))
            left -= n
            if lang == "zh":
                words = self._choices(ZH_VOCABULARY, cum_weights=_ZH_CUM, k=n)
                if self._random() < 0.35:
                    latin = rng.choice(W.GLUED)
                    words[rng.randrange(n)] += latin if self._random() < 0.7 else f" {latin} "
                out.append("".join(words) + rng.choice("。。，！？"))
            elif lang == "ja":
                words = self._choices(W.JA_WORDS, cum_weights=_JA_CUM, k=n)
                particles = self._choices(W.JA_PARTICLES, k=n)
                text = "".join(w + p for w, p in zip(words, particles, strict=True))
                if self._random() < 0.3:
                    text += rng.choice(W.GLUED)
                out.append(text + rng.choice(W.JA_ENDINGS))
            else:
                words = self._choices(W.KO_WORDS, cum_weights=_KO_CUM, k=n)
                particles = self._choices(W.KO_PARTICLES, k=n)
                spaced = [w + p for w, p in zip(words, particles, strict=True)]
                if self._random() < 0.3:
                    spaced.insert(rng.randrange(n), rng.choice(W.KO_FILLERS))
                if self._random() < 0.25:
                    spaced.insert(rng.randrange(n), rng.choice(W.GLUED))
                out.append(" ".join(spaced) + " " + rng.choice(W.KO_ENDINGS))
        return " ".join(out) if lang == "ko" else "".join(out)

    def talk(self, lang: str, low: int, high: int) -> str:
        """What a person or the model says: English, or CJK with some English mixed in."""
        if lang == "en":
            return self.sized_prose(low, high)
        units = int(low * (high / low) ** self._random())
        text = self.cjk(lang, units)
        if self._random() < 0.15:  # a pasted English line or command
            text += "\n" + self.prose(self.rng.randint(4, 12))
        return text

    # -- code and tools ----------------------------------------------------
    def code_line(self) -> str:
        rng, ident = self.rng, self.ident
        kind = rng.randrange(9)
        if kind == 0:
            return f"def {ident()}({ident()}: str, {ident()}: int = 0) -> dict:"
        if kind == 1:
            return f"    {ident()} = {ident()}.{ident()}({ident()}, timeout={rng.randint(1, 60)})"
        if kind == 2:
            return f'    if {ident()} is None:\n        raise {rng.choice(_ERRORS)}(f"{{path}}")'
        if kind == 3:
            return f"from {self.path()[:-3].replace('/', '.')} import {ident()}"
        if kind == 4:
            return f"class {ident().capitalize()}({ident().capitalize()}):"
        if kind == 5:
            return f"  const {ident()} = await {ident()}({{ {ident()}, retry: true }});"
        if kind == 6:
            return f"func {ident().capitalize()}(ctx context.Context, {ident()} string) error {{"
        if kind == 7:
            return "    # " + " ".join(self.words(rng.randint(4, 12)))
        return f"    return {ident()}.{ident()}()"

    def log_line(self) -> str:
        rng = self.rng
        kind = rng.randrange(7)
        if kind == 0:
            stamp = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T"
            stamp += f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"
            level = rng.choice(_LEVELS)
            return f"{stamp} {level} {self.ident()}: " + " ".join(self.words(rng.randint(4, 14)))
        if kind == 1:
            return f"Step {rng.randint(1, 9)}/9 : RUN " + self.command()
        if kind == 2:
            return f"{self.path()}:{rng.randint(1, 900)}: {self.code_line().strip()}"
        if kind == 3:
            outcome = rng.choice(("PASSED", "PASSED", "PASSED", "FAILED", "SKIPPED"))
            return f"tests/test_{self.ident().lower()}.py::test_{self.ident().lower()} {outcome}"
        if kind == 4:
            return (
                f'  File "/app/{self.path()}", line {rng.randint(1, 900)}, in {self.ident()}\n'
                f"{rng.choice(_ERRORS)}: " + " ".join(self.words(rng.randint(3, 9)))
            )
        if kind == 5:
            return f"ERROR: build failed with exit code {rng.randint(1, 2)}"
        return f"-rw-r--r--  1 agent staff {rng.randint(80, 90000):>6} {self.path()}"

    def command(self) -> str:
        rng = self.rng
        kind = rng.randrange(10)
        if kind == 0:
            return f"docker compose up -d {rng.choice(_SERVICES)}"
        if kind == 1:
            return f"kubectl get pods -n {rng.choice(_SERVICES)} -o wide"
        if kind == 2:
            return 'git commit -am "' + " ".join(self.words(rng.randint(3, 8))) + '"'
        if kind == 3:
            return f"pytest {self.path()} -x -q"
        if kind == 4:
            return f'grep -rn "{self.ident()}" {self.path().split("/")[0]}/'
        if kind == 5:
            return f"cat {self.path()}"
        if kind == 6:
            return f"systemctl restart {rng.choice(_SERVICES)}"
        if kind == 7:
            return f"npm run build -- --filter {self.ident()}"
        if kind == 8:
            return f"tail -n 200 /var/log/{rng.choice(_SERVICES)}/error.log"
        return f"python -m {self.path()[:-3].replace('/', '.')} --{self.ident().lower()}"

    def tool_calls(self, count: int) -> tuple[str, list[tuple[str, str, str | None]]]:
        """An assistant turn's ``tool_calls`` JSON and its (call id, tool, path) triples."""
        rng = self.rng
        calls = []
        triples = []
        for _ in range(count):
            name = rng.choice(W.TOOL_NAMES)
            path = None
            if name == "terminal":
                arguments = {"command": self.command()}
            elif name in ("read_file", "write_file", "patch"):
                path = self.path()
                arguments = {"path": path}
                if name != "read_file":
                    arguments["content"] = self.code_line()
            elif name == "search_files":
                arguments = {"pattern": self.ident(), "path": self.path().split("/")[0]}
            elif name == "delegate_task":
                arguments = {"goal": self.prose(rng.randint(8, 30))}
            else:
                arguments = {"query": " ".join(self.words(rng.randint(2, 7)))}
            call_id = f"call_{rng.getrandbits(96):024x}"
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
            )
            triples.append((call_id, name, path))
        return json.dumps(calls), triples

    def tool_output(self, name: str, path: str | None = None) -> str:
        """What a tool returns: a file's text, log lines, search results; a share as JSON.

        Files and log lines come from fixed pools, as in life: an agent reads
        the same files again and again, and logs repeat themselves.
        """
        rng = self.rng
        if name == "read_file":
            text = _file_text(path or self.path())
            if len(text) > 2_000 and self._random() < 0.5:  # a range of a long file
                start = rng.randrange(len(text) - 1_000)
                text = text[start : start + rng.randint(500, 4_000)]
            body = text
        elif name in ("terminal", "search_files"):
            pool = _log_pool()
            count = int(2 * 60 ** self._random())  # 2-120 lines, most short
            body = "\n".join([pool[int(self._random() * len(pool))] for _ in range(count)])
        elif name in ("web_search", "web_extract"):
            results = [
                {
                    "title": " ".join(self.words(rng.randint(3, 9))).title(),
                    "url": f"https://{self.ident().lower()}.example.com/{self.path()}",
                    "snippet": self.prose(rng.randint(15, 45)),
                }
                for _ in range(rng.randint(2, 6))
            ]
            return json.dumps({"results": results})
        elif name == "delegate_task":
            body = self.prose(rng.randint(30, 200))
        else:
            body = f"Wrote {rng.randint(1, 400)} lines to {path or self.path()}"
        if self._random() < 0.4:
            return json.dumps({"output": body, "exit_code": 0 if rng.random() < 0.85 else 1})
        return body

    # -- session-level text -------------------------------------------------
    def title(self) -> str:
        words = self.words(self.rng.randint(2, 5))
        return " ".join([self.rng.choice(W.HEAD_WORDS[20:200]).capitalize(), *words])

    def system_prompt(self, variant: int, day: int) -> str:
        """A prompt snapshot: one of a few dozen long templates plus a per-session line.

        The agent stores the whole assembled prompt (identity, tools, memory)
        with every session, so sessions carry kilobytes each that listings
        written as ``SELECT s.*`` read along.
        """
        base = _PROMPTS.get(variant)
        if base is None:
            pool = TextWriter(random.Random(7000 + variant))
            parts = [pool.prose(pool.rng.randint(300, 1200)) for _ in range(2)]
            base = _PROMPTS[variant] = "You are Hermes, an agent.\n\n" + "\n\n".join(parts)
        return f"{base}\n\nCurrent date: day {day} of the benchmark calendar."


_PROMPTS: dict[int, str] = {}


@cache
def _sentence_pool() -> list[tuple[str, int]]:
    writer = TextWriter(random.Random(6001))
    return [(writer.prose(n), n) for n in (writer.rng.randint(5, 18) for _ in range(20_000))]


@cache
def _log_pool() -> list[str]:
    """50,000 lines of terminal and search output, drawn from by every tool call."""
    writer = TextWriter(random.Random(6000))
    return [writer.log_line() for _ in range(50_000)]


@cache
def _file_text(path: str) -> str:
    """The text of the file at ``path``: the same every time it is read."""
    writer = TextWriter(random.Random(f"file:{path}"))
    return "\n".join(writer.code_line() for _ in range(int(4 * 50 ** writer.rng.random())))
