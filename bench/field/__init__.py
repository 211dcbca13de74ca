"""The field-size benchmark (``python -m bench.field``): a million messages, built once."""
