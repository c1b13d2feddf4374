"""qcc.Error: what the compiler and the runtime raise for a bad model, artifact,
file or request (their one-line message). Bad arguments raise TypeError or
ValueError."""


class Error(RuntimeError):
    """A compile or run failed; str(error) is qcc's one-line message."""
