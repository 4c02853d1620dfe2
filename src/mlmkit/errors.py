"""The one exception type mlmkit raises for bad input, so the CLI can print it cleanly."""


class MlmkitError(ValueError):
    """Bad input: the message names the input, what was wrong, and what to do."""
