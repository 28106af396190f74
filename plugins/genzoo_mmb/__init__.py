"""Built-in plugin: the MMB generator (a generator born from a classifier). Under construction."""
