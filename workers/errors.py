"""The exception tree for errors a user can act on.

Every `GreenspecError` carries a one-line message naming the file, key or value
at fault and what would be accepted; the CLI prints it and exits non-zero.
"""


class GreenspecError(Exception):
    """Base of every user-facing error: `str(err)` is one line."""


class SpecError(GreenspecError):
    """The experiment spec is malformed (unknown key, wrong type, bad value)."""


class CorpusError(GreenspecError):
    """A corpus or task source is missing, unreadable or empty."""


class IBaseError(GreenspecError):
    """An instance-base file is truncated, corrupt or built for another tokenizer/window."""


class TokenizerMismatch(GreenspecError):
    """Two components disagree about the tokenizer (vocab size or identity)."""


class DraftError(GreenspecError):
    """An unknown draft name or bad draft options."""


class ModelError(GreenspecError):
    """A verifier or draft model cannot be loaded."""


class PowerError(GreenspecError):
    """A power source was requested but is not available here."""


def first_line(err: BaseException) -> str:
    """The first line of an exception's message (its type name when the message is empty)."""
    return (str(err).strip().splitlines() or [type(err).__name__])[0]
