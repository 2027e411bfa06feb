"""The explorer's own error for what a user asked that cannot be done.

The page shows these as warnings, with their message, and changes nothing. Any other exception
is a bug: it reaches the log and the tests as an error, never as a friendly toast.
"""


class InputError(ValueError):
    """Something the user typed or asked for cannot be done; the message says what to do."""
