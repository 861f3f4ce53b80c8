"""A run: the spec, its cells, their inputs, the Ray driver loop that schedules them and stores their results."""
