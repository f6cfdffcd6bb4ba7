"""Case generators: pure, deterministic functions from op schemas to drafts.

One module per family; ``FAMILIES`` is the explicit list ``qconform golden regen`` walks."""
from __future__ import annotations

from typing import Callable, Iterable, Iterator

from conformance.case import Draft
from conformance.generators import basic, examples

FAMILIES: dict[str, Callable[[], Iterable[Draft]]] = {
    examples.FAMILY: examples.generate,
    basic.FAMILY: basic.generate,
}


def all_drafts() -> Iterator[Draft]:
    for family, gen in FAMILIES.items():
        n = 0
        for d in gen():
            n += 1
            yield d
        if n == 0:  # a generator that yields nothing is a bug, never a silent gap
            raise RuntimeError(f"generator family {family!r} produced no cases")
