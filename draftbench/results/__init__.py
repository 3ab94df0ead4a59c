"""The results file: rows and their values (speed-ups, theory, findings), the schema, the lock, output paths."""
