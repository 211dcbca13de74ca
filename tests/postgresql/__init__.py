"""The PostgreSQL backend's own rules: engine, schema, search plans, copy, replicas."""
