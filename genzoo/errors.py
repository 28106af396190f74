"""The one exception type users see: a single sentence saying what is wrong and how to fix it."""


class GenzooError(Exception):
    """A user-facing error. The CLI prints its message on one line and exits with status 1."""


class UnsupportedVerb(GenzooError):
    """A method was asked for a verb (fit, sample, refine) it does not declare."""


class WeightsError(GenzooError):
    """A model directory or weight file is missing, corrupt, mismatched or not safetensors."""


class ArgumentError(GenzooError):
    """A bad value for one argument of a Python function or CLI verb.

    ``message`` writes ``{arg}`` where the argument's name goes: from Python the message names the
    keyword (``kid_subset_size``), from the command line the CLI puts in the flag
    (``--kid-subset-size``) with :meth:`for_flag`.
    """

    def __init__(self, argument: str, message: str):
        self.argument = argument
        self.template = message
        super().__init__(message.format(arg=argument))

    def for_flag(self, flag: str) -> str:
        return self.template.format(arg=flag)
