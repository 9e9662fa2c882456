"""The client matrix: every client at pinned versions, one scenario program per language (see cells.py)."""
