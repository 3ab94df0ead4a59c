"""vLLM: the backend and its command line."""
