"""Built-in plugin: Idempotent Generative Network."""
