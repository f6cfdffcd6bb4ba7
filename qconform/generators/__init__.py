"""Case generators: pure, deterministic functions from op schemas to drafts.

One module per family; ``FAMILIES`` is the explicit list ``qconform golden regen`` walks."""
from __future__ import annotations

from typing import Callable, Iterable, Iterator

from qconform.case import Draft
from qconform.generators.common import only
from qconform.generators import basic, examples
from qconform.generators import (block_sizes, code_classes, codec_edges, constant_operand, defaults, explored,
                                    floatkinds, fp8_zero_point,
                                    granularity, granularity_edges, ignored_attributes, negative_axis, packing, precision,
                                    random, saturation, shapes, signed_zero, special_scales, specials, tie_positions, ties)
from qconform.generators import contrib_blocked, contrib_qlinear
from qconform.generators import conv, dynamic_quantize, ms_quant, patterns, qlinear_matmul

FAMILIES: dict[str, Callable[[], Iterable[Draft]]] = {
    examples.FAMILY: examples.generate,
    basic.FAMILY: basic.generate,
    ties.FAMILY: ties.generate,
    tie_positions.FAMILY: tie_positions.generate,
    saturation.FAMILY: saturation.generate,
    specials.FAMILY: specials.generate,
    floatkinds.FAMILY: floatkinds.generate,
    codec_edges.FAMILY: codec_edges.generate,
    packing.FAMILY: packing.generate,
    granularity.FAMILY: granularity.generate,
    shapes.FAMILY: shapes.generate,
    precision.FAMILY: precision.generate,
    random.FAMILY: random.generate,
    explored.FAMILY: explored.generate,
    defaults.FAMILY: defaults.generate,
    special_scales.FAMILY: special_scales.generate,
    granularity_edges.FAMILY: granularity_edges.generate,
    negative_axis.FAMILY: negative_axis.generate,
    ignored_attributes.FAMILY: ignored_attributes.generate,
    fp8_zero_point.FAMILY: fp8_zero_point.generate,
    signed_zero.FAMILY: signed_zero.generate,
    constant_operand.FAMILY: constant_operand.generate,
    code_classes.FAMILY: code_classes.generate,
    block_sizes.FAMILY: block_sizes.generate,
    **dynamic_quantize.entries(),
    **qlinear_matmul.entries(),
    **conv.entries(),
    **ms_quant.entries(),
    **patterns.entries(),
    **contrib_qlinear.entries(),
    **contrib_blocked.entries(),
}


def all_drafts(wanted: Callable[[str], bool] | None = None) -> Iterator[Draft]:
    """Every family's drafts, in FAMILIES order; with ``wanted`` (group -> keep?, e.g. a sampled
    regeneration's groups), only the drafts of those groups, and the generators that walk
    ``common.specs()`` skip the other op versions altogether."""
    for family, gen in FAMILIES.items():
        if wanted is None:
            drafts: Iterable[Draft] = gen()
        else:
            with only(wanted):  # drafted whole while the generators can see what is kept
                drafts = list(gen())
        n = 0
        for d in drafts:
            n += 1
            if wanted is None or wanted(d.id.split("/", 1)[0]):  # the case's group
                yield d
        if n == 0 and wanted is None:  # a generator that yields nothing is a bug, never a silent gap
            raise RuntimeError(f"generator family {family!r} produced no cases")
