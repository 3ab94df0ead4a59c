"""The vocabulary of a config: settings, candidates, models, labels, server arguments, prompts, workloads."""
