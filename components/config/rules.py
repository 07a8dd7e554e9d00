"""Cross-field rules that report every problem they find, so one run lists every independent mistake of a file.

pydantic collects the errors of every field, but a model validator that raises stops validation there: the rules
after it never run, and a stack file with three independent mistakes took three runs. A rule here is a generator
method of the settings model that yields `(setting, message)` for each problem it finds (the message says the
rule and the fix); `@rule` makes it an after-validator. Inside `collecting()` (validate_settings uses it) each
problem is added to the run's list and validation goes on; outside it, the first rule with problems raises a
ValueError, as a plain model validator would (pydantic wraps it in its ValidationError).

A rule that needs an earlier check to pass stops with `return` after yielding that problem.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from pydantic import model_validator

Problems = Iterator[tuple[str, str]]

_FOUND: ContextVar[list[tuple[str, str]] | None] = ContextVar("verl_ack_rule_problems", default=None)


def rule(check: Callable[[Any], Iterable[tuple[str, str]] | None]):
    """An after-model validator from a method yielding `(setting, message)` per problem (see the module doc)."""

    @functools.wraps(check)
    def validate(self):
        found = list(check(self) or ())
        if found:
            sink = _FOUND.get()
            if sink is None:
                raise ValueError("; ".join(message for _, message in found))
            sink.extend(found)
        return self

    validate.collects_every_problem = True  # type: ignore[attr-defined]  # tests hold every after-validator to this
    return model_validator(mode="after")(validate)


@contextmanager
def collecting() -> Iterator[list[tuple[str, str]]]:
    """Within the block, rules add their problems to the yielded list instead of raising."""
    found: list[tuple[str, str]] = []
    token = _FOUND.set(found)
    try:
        yield found
    finally:
        _FOUND.reset(token)
