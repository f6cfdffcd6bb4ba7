"""What a runtime's declaration is made of (``Runtime``, its reproducer ``Template``) and the helpers
the declarations share. Each runtime is declared once, in a light module named after its runner
(``qconform/declarations/runtimes/<runner>.py``); ``qconform.declarations.runtimes`` collects them.

Light on purpose: importing a declaration imports no runtime and changes no environment variable;
a runner module (which imports its runtime) is named as ``"module:Attr"`` and imported only when
chosen, and the few helpers a template needs from a runner are named the same way.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from importlib import metadata
from typing import Any

from qconform.declarations import operators


def call_helper(spec: str) -> Any:
    """``module:function`` called: a runner's helper, without importing the runner here."""
    module, _, func = spec.partition(":")
    return getattr(importlib.import_module(module), func)()


@dataclass(frozen=True)
class Template:
    """How a standalone script drives one runtime.

    ``run`` is the body (indented under ``try:`` in the script) that turns ``inputs`` (a dict of
    numpy arrays, graph inputs by name, in graph order) into ``actual`` (a dict of numpy arrays,
    outputs by name) for models whose inputs and outputs are all numpy types. ``codes`` names, for
    a type numpy lacks, the object the script maps it to in its ``CODES`` dict (a runtime type, an
    ONNX type number, an ml_dtypes type); with it, ``run_codes`` (and its ``helpers``) runs models
    where such arrays hold element codes. ``codes`` None: the runtime's binding carries numpy types
    only, and a group whose example needs another is skipped with the reason."""

    runtime: str  # qconform runner name
    package: str  # distribution whose installed version a finding is seen on (pip install name)
    imports: str  # import lines after ``import numpy as np``
    version: str  # expression for the runtime's version, printed first
    run: str
    codes: Callable[[Any], str | None] | None = None  # dtypes.ElemType -> expression, None: cannot carry it
    run_codes: str = ""
    helpers: str = ""
    codes_imports: str = ""  # extra imports when CODES is used
    #: The runtime takes raw ONNX-layout bytes for such types: sub-byte codes are packed (``to_bytes``).
    bytes_io: bool = False
    #: Extra words for README's "how to run" (a compiler the runtime needs ...).
    note: str = ""
    #: Environment the script needs (the verification run and the tests set it): name -> value.
    env: Callable[[], dict[str, str]] = field(default=dict)
    #: The installed version where the runtime is not a Python distribution (an npm package).
    version_of: Callable[[], str | None] | None = None
    #: README's install line, where it is not ``pip install PACKAGE==VERSION numpy`` ({version}).
    install: str = ""
    #: Tools the script needs besides the runtime itself (names of ``qconform.tools``).
    tools: tuple[str, ...] = ()

    def installed_version(self) -> str | None:
        if self.version_of is not None:
            return self.version_of()
        try:
            return metadata.version(self.package)
        except metadata.PackageNotFoundError:
            return None



#: How a runtime's installed version is read (``Runtime.version``, besides ``"module:function"``).
METADATA = "metadata"  # the distribution's metadata (``dist``)
ATTRIBUTE = "__version__"  # the imported module's ``__version__``

#: The cases the project's tests observe for a third-party runtime: a whole-corpus pass takes minutes
#: to tens of minutes there, so its facts are asserted complete on this slice (plus every fact's
#: example), and ``qconform facts drift --whole`` lists what the rest of the corpus adds. Single-node
#: cases only ("[!q]": not the qdq.* patterns, 2,037 of these families' cases since the patterns went
#: to depth, where a runtime's fused arithmetic and its refusals count by the hundred): the patterns
#: are the whole-corpus drift's (not yet reviewed into these runtimes' facts: issue 64's note).
THIRD_PARTY_CHECK = ("[!q]*-21/*/basic/*", "*-21/*/specials/*", "[!q]*-21/*/ties/*",
                     f"{operators.QLINEAR_MATMUL.label}-10/*/basic/*", f"{operators.DYNAMIC_QUANTIZE_LINEAR.label}-11/*")


#: qconform's own kernels implement the operators their declarations say they do
#: (qconform/declarations/operators.py), not the graphs around them.
KERNEL_SCOPE = operators.kernel_scope()[0]
KERNEL_SCOPE_REASON = "; ".join([
    "qconform's own kernels implement the quantization operators themselves; the QDQ patterns also hold MatMul, "
    "Conv, pools and other float operators they do not implement",
    *(f"{glob.rstrip('-*')}: {why}" for glob, why in operators.kernel_scope()[1])])


@dataclass(frozen=True)
class Runtime:
    """One runtime qconform runs cases on, declared once."""

    name: str  # the ``--runner`` name; reports, facts and findings name the runtime by it
    runner: str  # the bundled runner, "module:Attr", imported only when chosen
    #: the distribution that brings it (pip; npm for onnxruntime-web): what a finding installs and
    #: is seen on; None for qconform's own kernels (no runtime anyone ships)
    dist: str | None = None
    extra: str | None = None  # qconform's optional extra that installs it: pip install 'qconform[EXTRA]'
    module: str | None = None  # the module it imports: its absence means "not installed"
    #: how to read the installed version: METADATA (``dist``'s), ATTRIBUTE (``module.__version__``)
    #: or a "module:function"
    version: str = METADATA
    #: what its runner does that a reproducer must do too (defaults, session options, configs, flags)
    settings: Mapping[str, Any] = field(default_factory=dict)
    variant_of: str | None = None  # a variant: this other runtime's runner ...
    options: Mapping[str, str] = field(default_factory=dict)  # ... with these options (``--runner-opt``)
    check: tuple[str, ...] = ()  # case-id globs the facts tests observe; () = the whole corpus
    #: case-id globs its own facts file speaks for; elsewhere it runs as ``variant_of`` does and that
    #: runtime's facts hold (a fact is written once); () = the whole corpus
    facts_scope: tuple[str, ...] = ()
    #: case-id globs the runtime is certified on by default, and why the rest is left out (a runtime
    #: that by its own rule runs no single QuantizeLinear/DequantizeLinear node): () = the whole corpus
    scope: tuple[str, ...] = ()
    scope_reason: str = ""
    template: Template | None = None  # the reproducer ``qconform findings`` writes; None: none
    #: other pip distributions whose installed version is part of a run's identity: wheels sharing
    #: the runtime's import package (onnxruntime's variants), the runtime's other half (a compiler)
    also: tuple[str, ...] = ()
    #: the version the runner installs itself, where it installs its runtime (an npm package)
    pin: str | None = None

    @property
    def distributions(self) -> tuple[str, ...]:
        """Every distribution a report names the installed version of for this runtime."""
        return ((self.dist,) if self.dist else ()) + self.also

    @property
    def own(self) -> bool:
        """qconform's own kernels: a bundled runner, but no runtime anyone ships."""
        return self.dist is None

    @property
    def package(self) -> str | None:
        """The top-level import package, as a missing one is named (``ModuleNotFoundError.name``)."""
        return self.module.partition(".")[0] if self.module else None

    def installed_version(self) -> str | None:
        """The installed version (what facts are keyed by), or None where it is not installed."""
        if not self.module:
            return None
        try:
            mod = importlib.import_module(self.module)
            if ":" in self.version:
                return call_helper(self.version)
            if self.version == METADATA:
                return metadata.version(str(self.dist))
        except Exception:  # noqa: BLE001 - not installed, or broken: no facts apply
            return None
        return str(getattr(mod, "__version__", "")) or None


def with_template(rt: Runtime, imports: str, version: str, run: str, **kw: Any) -> Runtime:
    """``rt`` with its reproducer template (named and versioned as ``rt`` is)."""
    return replace(rt, template=Template(rt.name, str(rt.dist), imports, version, run, **kw))




def onnx_number(t) -> str:
    """The ONNX type number a reproducer's CODES map a type to (runtimes that take raw bytes by type)."""
    return f"{t.onnx}"


def ml_dtype(t) -> str:
    """The ml_dtypes type a reproducer views element codes as (runtimes that take ml_dtypes arrays)."""
    return f"ml_dtypes.{t.dtype.name}"
