"""PostgreSQL's rules: isolation, patience as ``lock_timeout``, retries, tsquery and search."""
