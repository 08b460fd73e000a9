"""The one exception type the helpers raise for bad input."""


class UsageError(ValueError):
    """Bad input (unknown model, prompt too long, empty dataset, ...).

    The message says what went wrong and what to do; the CLI prints it as one line.
    """
