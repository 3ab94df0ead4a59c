"""From request records to rows and verdicts: statistics, speed-ups, categories, concurrency, racing rules."""
