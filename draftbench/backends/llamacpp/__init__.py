"""llama.cpp's llama-server: the backend, its command line, its speculative statistics."""
