"""The one exception hierarchy of judge: every error says what was wrong and what to do."""

from __future__ import annotations


class JudgeError(Exception):
    """Base class of every error judge raises on purpose."""


class UnknownMetricError(JudgeError, ValueError):
    """A metric name that judge does not know."""


class InputFormatError(JudgeError, ValueError):
    """Input data (a file, a dict, a column) that does not have the expected shape."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None):
        self.path = path
        self.line = line
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + message)


class CoverageWarning(UserWarning):
    """Queries or samples scored 0 or left out because judgments or results are missing."""


class LLMError(JudgeError):
    """A call to a model failed; the message says whether retrying later can help."""


class LLMCallError(LLMError):
    """The provider kept failing (rate limits, server errors, timeouts) after all retries."""


class LLMRequestError(LLMError):
    """The provider refused the request (bad key, unknown model, bad request): not retried."""


class LLMConfigError(LLMRequestError):
    """The run's configuration cannot work: an API key missing or refused (401, 403), an
    unknown model (404), or no server answering at the address. Every request would fail
    the same way, so `score` and `evaluate` raise it instead of recording a judge error."""


class ContextWindowError(LLMRequestError):
    """A request too long for the model's context window, caught before it was sent."""


class InvalidOutputError(LLMError):
    """The model's output did not match the requested schema, even after re-asking.

    Attributes:
        raw: the model's last reply, as text.
        error: the JSON or validation error of that reply.
    """

    def __init__(self, message: str, *, raw: str, error: str):
        super().__init__(message)
        self.raw = raw
        self.error = error


class TruncatedOutputError(InvalidOutputError):
    """The model stopped at max_tokens (finish_reason "length") before its JSON was complete."""


class CacheError(JudgeError):
    """The judgment cache file cannot be used (damaged, foreign, or from a newer version)."""


class OutputError(JudgeError):
    """An output folder or file cannot be written: a file in the way, a read-only or full
    disk, or another judge run writing to the same folder."""


class CacheMiss(JudgeError):
    """Replay mode found no recorded judgment for a request; nothing was sent to the network."""

    def __init__(self, message: str, *, key: str):
        super().__init__(message)
        self.key = key


def is_replay_miss(error: str) -> bool:
    """Whether a judge failure's message (as a row's `errors` holds it: "Type: text") is a
    replay's `CacheMiss`."""
    return error.startswith(CacheMiss.__name__)


class CacheStoreError(CacheError):
    """The cache could not store a judgment (disk full, I/O error, a read-only file): every
    later judgment would be paid for and lost the same way, so `score` and `evaluate` stop
    the run with it, as with `LLMConfigError`; the rows finished before it are kept."""


class GateCannotFailError(JudgeError):
    """A gate that no data could fail, refused rather than passed: a regression gate with
    too few paired questions (or conversations) for its test to reach its alpha."""
