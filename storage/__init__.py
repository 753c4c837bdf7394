"""Storage: the SQLModel tables, the engine factory and the only SQL in Pitwall (repo.py)."""
