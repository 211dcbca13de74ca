"""Docs, types and layout: the site builds, examples run, mypy, the dialect boundary."""
