"""The one exception the assembly package raises on purpose."""


class UnreadableInput(Exception):
    """The input can't be read at all: an unknown format, a broken HAR, a HAR
    with no event stream, an entry out of range.  The message is one line
    meant for a person."""
