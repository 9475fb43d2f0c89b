"""Sending cases to models: OpenAI-compatible endpoints and built-in baselines.

- `keys`: API keys (environment or Prefect Secret blocks), checked where read and registered
  for redaction (numerate.kernel.credentials): never stored or logged;
- `retries`: what is retried and how long to wait (Retry-After wins);
- `limits`: a model's shared client, in-flight bounds and breaker;
- `answerers`: an endpoint's answerer (retries, rate limits) and the baselines';
- `pacing`: adaptive concurrency, from what the endpoint answers;
- `checks`: checking endpoints before anything is sent, and `preflight`: every check before a
  run (results location, concurrency limits, endpoints, database, the run to resume), for the
  CLI and the flow alike;
- `answering`: a batch's answers, graded as they arrive and journaled at once.
"""

from numerate.endpoints.answering import answer_cases
from numerate.endpoints.checks import check_concurrency_limit, check_endpoint, check_endpoints
from numerate.endpoints.keys import EndpointError
from numerate.endpoints.limits import Breaker, endpoints_in_use, stopped_cause
from numerate.endpoints.retries import backoff_s, retry_after_s

__all__ = [
    "Breaker",
    "EndpointError",
    "answer_cases",
    "backoff_s",
    "check_concurrency_limit",
    "check_endpoint",
    "check_endpoints",
    "endpoints_in_use",
    "retry_after_s",
    "stopped_cause",
]
