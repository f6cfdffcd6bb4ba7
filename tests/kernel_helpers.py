"""What the kernel tests share (tests/test_kernels*.py): the cpu-kernel runner as a module fixture
(imported by each test module: pytest finds a fixture in the module's namespace), and the judgement
of a draft built from input values: the oracle's reading, bit for bit (strict profile)."""
from __future__ import annotations

import numpy as np
import pytest

from qconform import dtypes
from qconform.compare import compare
from qconform.model import build_model
from qconform.runner import Unsupported, prepare


@pytest.fixture(scope="module")
def cpu_kernel():
    from qconform.runners.cpu_kernel import CpuKernelRunner

    try:
        return CpuKernelRunner()
    except Unsupported as exc:  # a machine without a C compiler
        pytest.skip(str(exc))


def draft(op, values: dict[str, np.ndarray], attrs: dict | None = None):
    """A draft of ``op`` (a declaration) at its newest version from input values by name (trailing
    absent inputs left out)."""
    from qconform.case import Arg, Draft

    args = tuple(Arg(i.name, dtypes.get(values[i.name].dtype).name, values[i.name]) if i.name in values else None
                 for i in op.inputs)
    while args and args[-1] is None:
        args = args[:-1]
    return Draft(op.op, op.versions[-1], "kernel-test", "beyond", "case", args, attrs or {}, domain=op.domain)


def judged(runner, op, values: dict[str, np.ndarray], attrs: dict | None = None) -> None:
    """The draft judged in the strict profile: the kernel must give the oracle's reading bit for bit."""
    from qconform.oracle import evaluate

    case = evaluate(draft(op, values, attrs))
    outcome = compare(case, prepare(runner, build_model(case))(case.feeds), profile="strict")
    assert outcome.verdict == "pass", outcome.message(case)
