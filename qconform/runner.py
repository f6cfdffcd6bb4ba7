"""The runner contract vendors code against, and how ``--runner`` names are resolved.

A runner turns an ONNX model plus named inputs into a list of output arrays. Arrays of element
types numpy lacks travel as ml_dtypes arrays, one element per array element (never packed).
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import onnx

from qconform.declarations.runtimes import RUNTIMES
from qconform.verdicts import FAULTS

Inputs = Mapping[str, np.ndarray]
Outputs = list[np.ndarray]
Prepared = Callable[[Inputs], Outputs]

ENTRY_POINT_GROUP = "qconform.runners"
#: ``--runner remote:HOST:PORT``: a ``qconform worker`` (or a device team's own, qconform/docs/protocol.md).
REMOTE = "remote:"

#: Bundled runners: name -> "module:Attr" (imported only when chosen), from each runtime's
#: declaration (``qconform.declarations.runtimes``); the third-party runtimes are optional extras:
#: pip install 'qconform[openvino]', ...
BUNDLED: dict[str, str] = {name: rt.runner for name, rt in RUNTIMES.items() if not rt.variant_of}
#: Bundled runners whose runtime is an optional extra: runner name -> the module it imports.
EXTRAS: dict[str, str] = {name: str(rt.package) for name, rt in RUNTIMES.items() if rt.extra}

#: Runtimes certified through another runner: name -> (runner, its options, the distribution that
#: carries them). An onnxruntime variant's wheel brings its execution provider under the
#: ``onnxruntime`` import package; ``--runner onnxruntime-openvino`` is the onnxruntime runner on
#: that provider alone. Reports, facts and findings name such a run by this name (``runtime_name``).
VARIANTS: dict[str, tuple[str, dict[str, str], str]] = {
    name: (str(rt.variant_of), dict(rt.options), str(rt.dist)) for name, rt in RUNTIMES.items() if rt.variant_of
}


def identity_digest(ident: Mapping[str, Any]) -> str:
    """A run's runner as one digest: its identity (``identity``) without how it was loaded (``load``:
    the spec as typed) and with its source file by SHA-256 only, so a worker that resolves the same
    runner elsewhere (a runner worker, a Dask worker in another folder) gets the same digest, and
    another runtime, version, setting, platform or file gets another."""
    import hashlib
    import json

    core = {k: v for k, v in ident.items() if k != "load"}
    if isinstance(core.get("source"), Mapping):
        core["source"] = core["source"].get("sha256")
    return hashlib.sha256(json.dumps(core, sort_keys=True, default=str).encode()).hexdigest()


def bundled_runtime(identity: Mapping[str, Any]) -> str:
    """The bundled runtime a report's runner is (``runtime_name``), where its class is qconform's own
    bundled runner for it, file for file (``identity``'s source SHA-256); else ''. What is measured or
    declared for a bundled runtime (its packing equivalence, its certified scope) is never granted to
    another runner on the word of its describe()."""
    import hashlib
    import importlib.util

    name = runtime_name(identity)
    rt = RUNTIMES.get(name)
    spec = BUNDLED.get(str(rt.variant_of or name)) if rt is not None else None
    source = identity.get("source") if isinstance(identity.get("source"), Mapping) else {}
    if spec is None or not source.get("sha256"):
        return ""
    found = importlib.util.find_spec(spec.split(":")[0])
    try:
        ours = hashlib.sha256(Path(found.origin).read_bytes()).hexdigest() if found and found.origin else ""
    except OSError:
        return ""
    return name if ours == source["sha256"] else ""


def declared_scope(identity: Mapping[str, Any]) -> dict | None:
    """The cases a bundled runtime is certified on by default, where its declaration narrows them
    (``{"cases": globs, "why": sentence}``), else None. Both front-ends apply it to a run with no
    selection of its own; never granted to another runner on the word of its describe()."""
    rt = RUNTIMES.get(bundled_runtime(identity))
    if rt is None or not rt.scope:
        return None
    return {"cases": list(rt.scope), "why": rt.scope_reason}


def ran_elsewhere(identity: Mapping[str, Any]) -> str:
    """Where a report's runtime ran when not on this machine: a device worker's address, or the
    folder of a device's stored results ('' when it ran here)."""
    return str(identity.get("remote") or identity.get("results") or "")


def runtime_name(identity: Mapping[str, Any]) -> str:
    """The runtime a report's runner identity (``describe()``) names: the runner's name, or for
    onnxruntime on an execution provider the variant declared for it (``VARIANTS``), else
    ``onnxruntime[PROVIDER,...]``: another provider's run is never taken for the CPU EP's."""
    name, providers = str(identity["name"]), list(identity.get("providers") or [])
    level = (identity.get("options") or {}).get("optimize")
    for variant, (runner, options, _) in VARIANTS.items():
        if runner != name:
            continue
        settings = RUNTIMES[runner].settings
        default = settings.get("providers", "")
        levels = settings.get("levels", {})
        same_level = "optimize" not in options or levels.get(options["optimize"]) == level
        if options.get("providers", default) == ",".join(providers or [default]) and same_level:
            return variant
    if not providers or providers == ["CPUExecutionProvider"]:
        return name
    return f"{name}[{','.join(providers)}]"


class Unsupported(Exception):
    """Raised by a runner that cannot execute a model; the case is reported *unsupported*."""


class CaseFault(Exception):
    """Raised by a runner whose case crashed or hung where it really ran (a device worker behind
    ``remote:HOST:PORT``): the case is ``crashed`` or ``timeout`` (``kind``), as a local worker's would be."""

    def __init__(self, kind: str, message: str) -> None:
        if kind not in FAULTS:
            raise ValueError(f"CaseFault kind {kind!r}: crashed or timeout")
        super().__init__(message)
        self.kind = kind


class NotRun(Exception):
    """Raised by a runner that could not run a case for a reason outside the runtime: the device
    cannot be reached, its connection dropped or stalled, the transport refused the request. The
    case is *not run* (never a deviation, never stored as done) and the run is incomplete; with
    ``stop`` the device is gone for good and the front-end stops the run, as Ctrl-C does."""

    def __init__(self, message: str, stop: bool = False) -> None:
        super().__init__(message)
        self.stop = stop


class RunnerError(Exception):
    """Bad runner configuration: one clear line for the user, no traceback."""


@runtime_checkable
class Runner(Protocol):
    name: str

    def describe(self) -> dict[str, Any]: ...

    def run(self, model: onnx.ModelProto, inputs: Inputs) -> Outputs: ...


class BaseRunner:
    """Convenience base: ``prepare`` wraps ``run``; subclasses building sessions override it."""

    name = "base"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    def run(self, model: onnx.ModelProto, inputs: Inputs) -> Outputs:
        return self.prepare(model)(inputs)

    def prepare(self, model: onnx.ModelProto) -> Prepared:
        if type(self).run is BaseRunner.run:
            raise NotImplementedError(f"{type(self).__name__} implements neither run nor prepare")
        return lambda inputs: self.run(model, inputs)


def prepare(runner: Runner, model: onnx.ModelProto) -> Prepared:
    """A runner's prepared callable, falling back to ``run`` for runners without ``prepare``."""
    prep = getattr(runner, "prepare", None)
    if callable(prep):
        return prep(model)
    return lambda inputs: runner.run(model, inputs)


def describe(runner: Runner) -> dict[str, Any]:
    """``describe()`` with the name always present, even for a minimal runner."""
    info = dict(runner.describe()) if hasattr(runner, "describe") else {}
    info.setdefault("name", getattr(runner, "name", type(runner).__name__))
    return info


def identity(runner: Runner, name: str, options: Mapping[str, str] | None = None) -> dict:
    """The runner's ``describe()`` (JSON-safe), the file its class is defined in with its SHA-256 --
    where a vendor's runner keeps its settings (an execution provider's options), the certificate
    says which code produced it -- and ``load``: the ``--runner`` spec (a file made absolute) and
    ``--runner-opt`` words that load it again (``qconform findings --from-report`` does). A
    describe() that raises is a RunnerError in one line: a report nobody can attribute is not
    written, and no case runs."""
    import hashlib
    import inspect
    import json

    try:
        ident = json.loads(json.dumps(describe(runner), default=str))
    except RunnerError:  # already one line for the user (a device that cannot be reached or used)
        raise
    except Exception as exc:  # noqa: BLE001 - the runner's own mistake, reported as such
        first = (str(exc).strip().splitlines() or [""])[0]
        raise RunnerError(f"runner {name!r}: describe() raised {type(exc).__name__}: {first} (no case was run)") \
            from None
    try:
        path = Path(inspect.getsourcefile(type(runner)) or "")
        ident.setdefault("source", {"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
    except (OSError, TypeError):
        pass
    ident["load"] = {"runner": portable_spec(name), "options": dict(options or {})}
    return ident


def parse_options(items: list[str]) -> dict[str, str]:
    """``--runner-opt KEY=VALUE`` words (repeatable) as the constructor's keyword arguments."""
    opts = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise RunnerError(f"--runner-opt {item!r} is not KEY=VALUE")
        opts[key] = value
    return opts


def portable_spec(name: str) -> str:
    """``--runner`` as another process in another directory can load it: a ``file.py:Attr`` spec
    with its file made absolute (a report's findings load the same runner later, elsewhere)."""
    target, sep, attr = name.rpartition(":")
    if sep and (target.endswith(".py") or "/" in target or "\\" in target):
        return f"{Path(target).expanduser().resolve()}:{attr}"
    return name


def _available() -> list[str]:
    return sorted(set(BUNDLED) | set(VARIANTS) | {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


def _load_attr(spec: str, how: str) -> Any:
    target, _, attr = spec.rpartition(":")
    if target.endswith(".py") or "/" in target or "\\" in target:
        path = Path(target).expanduser()
        if not path.is_file():
            raise RunnerError(f"runner file {target!r} (from {how}) does not exist")
        mod_name = f"qconform_user_runner_{abs(hash(str(path.resolve())))}"
        file_spec = importlib.util.spec_from_file_location(mod_name, path)
        assert file_spec and file_spec.loader
        module = importlib.util.module_from_spec(file_spec)
        sys.modules[mod_name] = module
        file_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise RunnerError(f"{target!r} (from {how}) has no attribute {attr!r}") from None


def _instantiate(obj: Any, options: Mapping[str, str], label: str) -> Runner:
    if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "run")):
        try:
            obj = obj(**options)
        except TypeError as exc:
            raise RunnerError(f"runner {label!r} rejected its options {dict(options)}: {exc}") from None
        except Unsupported as exc:
            raise RunnerError(f"runner {label!r} cannot start here: {exc}") from None
    elif options:
        raise RunnerError(f"runner {label!r} is an instance and takes no --runner-opt ({dict(options)})")
    if not callable(getattr(obj, "run", None)) and not callable(getattr(obj, "prepare", None)):
        raise RunnerError(f"runner {label!r} has neither run() nor prepare(); see the Runner contract")
    return obj


def resolve(name: str, options: Mapping[str, str] | None = None) -> Runner:
    """Resolve ``--runner``: bundled name, entry point, ``module:Attr``, then ``file.py:Attr``."""
    options = dict(options or {})
    tried = []
    try:
        if name in VARIANTS:
            runner, preset, _ = VARIANTS[name]
            tried.append(f"{runner} with {preset}")
            return _instantiate(_load_attr(BUNDLED[runner], "bundled runners"), {**preset, **options}, name)
        if name in BUNDLED:
            tried.append(f"bundled {BUNDLED[name]}")
            return _instantiate(_load_attr(BUNDLED[name], "bundled runners"), options, name)
        if name.startswith(REMOTE):
            tried.append("a device worker over TCP")
            remote = _load_attr("qconform.runners.remote:RemoteRunner", "--runner remote:HOST:PORT")
            return _instantiate(lambda **o: remote(name[len(REMOTE):], **o), options, name)
        eps = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
        if eps:
            tried.append(f"entry point {eps[0].value}")
            return _instantiate(eps[0].load(), options, name)
        if ":" in name:
            tried.append(name)
            return _instantiate(_load_attr(name, "--runner"), options, name)
    except RunnerError:
        raise
    except ModuleNotFoundError as exc:
        if name in VARIANTS and exc.name == RUNTIMES[name].package:
            dist, plain = VARIANTS[name][2], RUNTIMES[name].variant_of
            raise RunnerError(f"runner {name!r} needs {dist}: pip install {dist} (in a venv of its own: it "
                              f"replaces plain {plain})") from None
        if name in EXTRAS and exc.name == EXTRAS[name]:
            raise RunnerError(f"runner {name!r} needs the {exc.name} package: pip install "
                              f"'qconform[{RUNTIMES[name].extra}]'") from None
        raise RunnerError(f"runner {name!r} failed to load ({'; '.join(tried)}): {type(exc).__name__}: {exc}") from None
    except Exception as exc:  # a plugin that fails to import: one line, what and where
        raise RunnerError(
            f"runner {name!r} failed to load ({'; '.join(tried)}): {type(exc).__name__}: {exc}"
        ) from None
    raise RunnerError(
        f"unknown runner {name!r} from --runner; known: {', '.join(_available())}; "
        f"or use package.module:Attr or path/to/file.py:Attr"
    )
