"""The one exception type users see: a single sentence saying what is wrong and how to fix it."""


class GenzooError(Exception):
    """A user-facing error. The CLI prints its message on one line and exits with status 1."""


class UnsupportedVerb(GenzooError):
    """A method was asked for a verb (fit, sample, refine) it does not declare."""


class WeightsError(GenzooError):
    """A model directory or weight file is missing, corrupt, mismatched or not safetensors."""
