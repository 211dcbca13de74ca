"""What the tests use that is not a test: worker scripts, schema builders, helpers."""
