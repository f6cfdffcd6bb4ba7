"""Runners the benchmarks use: deliberately wrong in a known way, so their figures do not depend on
what a real runtime gets wrong this release."""
from __future__ import annotations


from qconform.runners.cpu_ref import CpuRefRunner


class FlipIntegerRunner(CpuRefRunner):
    """cpu-ref with the lowest bit of every 8/16/32-bit integer output element flipped: every case with
    such an output fails, with as many mismatches as it has elements."""

    name = "flip-integer"

    def prepare(self, model):
        run = super().prepare(model)

        def wrong(feeds):
            out = []
            for o in run(feeds):
                if o.dtype.kind in "iu":
                    o = (o.view(f"u{o.dtype.itemsize}") ^ 1).view(o.dtype)
                out.append(o)
            return out

        return wrong
