"""LM Studio: the backend, choosing SDK or REST, the lms CLI, the REST API and the SDK."""
