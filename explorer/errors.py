"""The explorer's own error for what a user asked that cannot be done.

The page shows these as warnings, with their message, and changes nothing. Any other exception
is a bug: it reaches the log and the tests as an error, never as a friendly toast.
"""


class InputError(Exception):
    """Something the user typed or asked for cannot be done; the message says what to do.

    Not a ValueError (nor any built-in a library raises): an ``except ValueError`` meant for a
    library's refusal must never catch a user's mistake, and a bug's ValueError must never reach a
    user dressed as one of these."""


def as_sentence(error: BaseException | str) -> str:
    """A message as a sentence, capitalised and closed with a full stop, so that another sentence
    can follow it ("choose 0 to 29" then "A new one is shown" ran together)."""
    text = str(error).strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."
