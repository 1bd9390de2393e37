"""What a provider's error means for a batch: an unusable answer, a rejected method, a request
refused as such, or the provider unavailable.

* An *unusable answer* (cut off at its length limit, stopped by the content filter, output a
  parser refused) is the model's answer failing the schema: repaired once, then an invalid plan.
* A *rejected method* (an HTTP error answer to the structured-output form, or a model class that
  does not implement it) is retried once with the fallback method.
* A *refused request* (HTTP 400, 413, 422, after the fallback) would fail again: it is the
  batch that failed (:class:`RequestRefused`, a plain :class:`~worker.errors.ConsolidatorError`,
  counted toward dead-lettering), and the bulkheads halve the chunk to find the candidate.
* Anything else (5xx, 401/403, 408, 429, transport failures, a missed deadline) is the
  infrastructure failing: :class:`~worker.errors.ModelUnavailable`, the batch stays pending.
"""

from __future__ import annotations

import json
from typing import Final

from langchain_core.exceptions import OutputParserException
from pydantic import ValidationError

from worker.errors import ConsolidatorError, ModelUnavailable

#: HTTP statuses with which a server refuses the *form* of a request (the method) rather than
#: being unreachable; llama.cpp's server answers an unsupported response_format with 500.
_REJECTION_STATUSES: Final = frozenset({400, 404, 405, 415, 422, 500, 501})

#: HTTP statuses that refuse *this request* (malformed, too large, unprocessable): sending it
#: again fails the same way, so it is the batch that failed (counted toward dead-lettering),
#: not the provider that is unavailable. Other statuses (5xx, 401/403, 408, 429) are outages
#: or configuration the operator fixes without touching the batch.
_REQUEST_REFUSED: Final = frozenset({400, 413, 422})


class RequestRefused(ConsolidatorError):
    """The provider refused the request as such (HTTP 400, 413, 422): sending the same
    candidates again would be refused again."""


def method_rejected(exc: BaseException) -> bool:
    """Whether ``exc`` says the server (or model class) refused the structured-output method.

    An HTTP error answer counts (``status_code`` on the exception or its ``response``, as the
    OpenAI, Anthropic and httpx errors carry it); timeouts and connection errors do not.

    >>> class Rejected(Exception):
    ...     status_code = 500
    >>> method_rejected(Rejected("json_schema is not supported")), method_rejected(TimeoutError())
    (True, False)
    """
    if isinstance(exc, NotImplementedError):
        return True
    return http_status(exc) in _REJECTION_STATUSES


def http_status(exc: BaseException) -> int | None:
    """The HTTP status an SDK error carries (on itself or its ``response``), or None."""
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def answer_problem(exc: BaseException) -> str | None:
    """The problem to show the model when the *answer* made the call raise, else None.

    Some providers raise instead of returning an unparsable answer: OpenAI's client when the
    answer hit the length limit or the content filter (``LengthFinishReasonError``,
    ``ContentFilterFinishReasonError``), LangChain's parsers on malformed output. That is the
    model's answer failing the schema (repaired once, then an invalid plan), not the model
    being unavailable.

    >>> class LengthFinishReasonError(Exception): ...
    >>> answer_problem(LengthFinishReasonError("limit"))[:38]
    'the answer was cut off at its length l'
    >>> answer_problem(ConnectionError("refused")) is None
    True
    """
    name = type(exc).__name__
    if name == "LengthFinishReasonError":
        return (
            "the answer was cut off at its length limit before the plan was complete; answer "
            "with one short ConsolidationPlan: one operation per candidate, short texts"
        )
    if name == "ContentFilterFinishReasonError":
        return "the answer was stopped by the content filter; answer with one ConsolidationPlan"
    if isinstance(exc, OutputParserException | ValidationError | json.JSONDecodeError):
        return (
            f"the answer did not match the ConsolidationPlan schema: {str(exc)[:300]}; answer "
            "with one ConsolidationPlan holding all operations"
        )
    return None


def provider_failure(exc: BaseException, *, namespace: str, method: str) -> ConsolidatorError:
    """The error a failed call raises, once it is neither an unusable answer nor a rejected
    method with a fallback left: :class:`RequestRefused` or :class:`ModelUnavailable`.

    >>> class TooLarge(Exception):
    ...     status_code = 413
    >>> type(provider_failure(TooLarge("big"), namespace="user:u1", method="json_schema"))
    <class 'worker.consolidation.provider_errors.RequestRefused'>
    >>> type(provider_failure(ConnectionError(), namespace="user:u1", method="json_schema"))
    <class 'worker.errors.ModelUnavailable'>
    """
    what = f"(structured-output method {method}): {type(exc).__name__}: {str(exc)[:500]}"
    if http_status(exc) in _REQUEST_REFUSED:
        return RequestRefused(
            f"the model provider refused the request for {namespace} {what}; the same request "
            "would be refused again, so this counts as a failed attempt"
        )
    return ModelUnavailable(
        f"the consolidation model failed for {namespace} {what}; the batch stays pending and "
        "is retried"
    )


def deadline_missed(namespace: str, timeout_seconds: float) -> ModelUnavailable:
    """The error of a call abandoned past its deadline."""
    return ModelUnavailable(
        f"the consolidation model did not answer for {namespace} within {timeout_seconds:g} s "
        "(MEMWORKER_MODEL_TIMEOUT_SECONDS); the batch stays pending and is retried"
    )
