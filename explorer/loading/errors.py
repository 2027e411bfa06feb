"""Errors a user can act on: each message says what to do next."""


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message says why and what to do."""


class UnknownModelError(ModelLoadError):
    pass


class ModelUnavailableError(ModelLoadError):
    pass
