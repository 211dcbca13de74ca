"""Operating a store: fleets on one PostgreSQL server, backups, and salvage of damaged files."""
