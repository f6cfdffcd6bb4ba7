"""SIGTERM stops a run as Ctrl-C does, in both front-ends (``qconform certify`` and the pytest plugin):
the cases done are reported and the run is said interrupted. A CI job's timeout, a scheduler and
``kill`` send SIGTERM, and a run started in the background by a shell ignores SIGINT, so without this
a stopped run ended with no report at all."""
from __future__ import annotations

import signal
import threading
from typing import Any


def sigterm_as_interrupt() -> Any:
    """Make SIGTERM raise KeyboardInterrupt; returns the handler to put back with :func:`restore`
    (None where signals cannot be set: not the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def _raise(signum, frame):  # noqa: ARG001 - the signal handler's signature
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, _raise)


def restore(previous: Any) -> None:
    """Put back the SIGTERM handler :func:`sigterm_as_interrupt` replaced."""
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)
