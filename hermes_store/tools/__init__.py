"""Operations on a whole store: copy, check, backup, recovery of a damaged file."""
