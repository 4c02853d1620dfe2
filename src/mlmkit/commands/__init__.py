"""CLI commands: each module defines `register(app)` and is discovered by `mlmkit.cli`."""
