"""HTTP to a server: streamed chat completions, the SSE reader, numbers a server reports, Prometheus text."""
