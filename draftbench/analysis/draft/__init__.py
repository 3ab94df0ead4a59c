"""Inside a draft: acceptance by position, the best draft length from one run, the ceiling."""
