"""The store's rules that need no database: argument checks, titles, query syntax, substrings.

Pure functions and small values, used by the repositories (which keep the
rules that do need the database: counters, lineage, uniqueness).
"""
