"""Process lifetime: servers started so that none outlives us (groups, supervisor, PID files), and polling."""
