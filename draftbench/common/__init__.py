"""What every layer uses: errors, paths and atomic files, text safety, secrets, GGUF headers."""
