"""Damage and its repair: backup, recover, corruption, replaced files, unusable databases."""
