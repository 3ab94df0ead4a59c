"""Requests against a ready server: one stream over the prompt set, or N streams at once."""
