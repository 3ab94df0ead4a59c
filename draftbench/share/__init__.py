"""Sharing results: comparing files, exporting them, redacting local paths."""
