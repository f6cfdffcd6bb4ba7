"""``pytest --runner NAME --model FILE``: a user's quantized model, group by group and whole (pytest feature).

Why a feature of its own: the pytest front-end must judge a model exactly as ``qconform certify
--model`` does, so both take the model's corpus from ``qconform.gating.model_cases`` (read, checked,
drafted at the model's own parameters) and the whole-model check from ``qconform.gating.model_check``;
this module only places them in pytest's session. ``model_corpus`` (called by the plugin object's
``pytest_configure`` before the corpus is indexed) writes the model's cases into ``DIR/model-corpus``
with ``--report DIR``, else into a temporary directory removed at the end, and that corpus is
collected as the bundled one would be. When the cases have run, before the report is assembled, the
model runs whole on the runner (controller only), so the check's finding is in the report's gate and
exit status; with ``--report`` groups.md and the reproducers (``model_check.documents``) are then
written beside the report and listed in its SHA256SUMS.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from qconform.gating import model_cases as mc
from qconform.gating import model_check
from qconform.gating import model_groups as mg
from qconform.plugin.options import PLUGIN, is_xdist_worker

#: The model's drafted corpus (``model_cases.Built``), where ``--model`` was given.
MODEL = pytest.StashKey[mc.Built]()
#: The whole-model check's outcome, once the session has finished.
WHOLE = pytest.StashKey[model_check.Check]()
#: The temporary corpus directory to remove (no ``--report``).
_TEMP = pytest.StashKey[Path]()
#: The corpus directory a controller hands its xdist workers (they read, never draft, the model).
WORKERINPUT_CORPUS = "qconform_model_corpus"


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("qconform-model", "qconform: a user's quantized model")
    g.addoption("--model", default=None, metavar="FILE",
                help="with --runner: certify this quantized ONNX model group by group at its own parameters, and "
                     "whole, instead of the corpus (qconform certify --model does the same)")
    g.addoption("--model-inputs", default=None, metavar="FILE.npz",
                help="with --model: a calibration input (graph inputs by name); each group is also judged on the "
                     "values it receives from it, and the whole model is run on it")


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("model", None) and not config.getoption("runner", None):
        raise pytest.UsageError("--model needs --runner (the runtime the model is certified on)")


def model_corpus(config: pytest.Config) -> Path | None:
    """The corpus of ``--model``'s groups, drafted and written (None without ``--model``); a model
    that cannot be certified is a UsageError of one line, before any case is collected."""
    path = config.getoption("model", None)
    if not path:
        if config.getoption("model_inputs", None):
            raise pytest.UsageError("--model-inputs FILE.npz needs --model FILE")
        return None
    if config.getoption("golden", None):
        raise pytest.UsageError("--model makes its own corpus: it takes no --golden")
    if is_xdist_worker(config) and config.workerinput.get(WORKERINPUT_CORPUS):
        return Path(config.workerinput[WORKERINPUT_CORPUS])  # drafted once, by the controller
    try:
        built = mc.build(path, config.getoption("model_inputs", None))
    except mg.ModelError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[MODEL] = built
    if not built.cases:
        raise pytest.UsageError(f"{path}: no group of the model can be judged: "
                                + "; ".join(built.not_judged_lines()))
    report = config.getoption("report", None)
    if report:
        root = Path(report) / mc.CORPUS_DIR
    else:
        root = Path(tempfile.mkdtemp(prefix="qconform-model-"))
        config.stash[_TEMP] = root
    mc.write_corpus(built, root)
    config.pluginmanager.register(_Session(config), "qconform-model-session")
    return root


def built_of(config: pytest.Config) -> mc.Built | None:
    """The session's model, or None without ``--model``."""
    return config.stash.get(MODEL, None)


class _Session:
    """The hooks of a ``--model`` session (registered by ``model_corpus``)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        """xdist controller: each worker collects the corpus drafted here."""
        node.workerinput[WORKERINPUT_CORPUS] = str(self.config.stash[PLUGIN].index.root)

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int):
        """Before the report is assembled (every other implementation runs inside this wrapper): the
        whole-model check, kept on the model so the report's ``invocation.model`` and its gate hold it
        (``model_check.gate``: the exit status, report.json, the certificate and summary.md agree);
        after it is written, groups.md and the reproducers beside it, listed in its SHA256SUMS."""
        config = self.config
        if is_xdist_worker(config) or config.option.collectonly:
            return (yield)
        built, plugin = config.stash[MODEL], config.stash[PLUGIN]
        if session.exitstatus != pytest.ExitCode.INTERRUPTED:  # an interrupted run certifies nothing
            built.whole = model_check.check(built, plugin.runner, strict_nan=bool(config.getoption("strict_nan")),
                                            profile=config.getoption("profile"),
                                            diagnose=config.getoption("diagnose") == "on")
            config.stash[WHOLE] = built.whole
        result = yield
        whole = config.stash.get(WHOLE, None)
        report = config.getoption("report", None)
        if report and (Path(report) / "report.json").is_file():
            from qconform.report import writer

            records = [r.to_dict() for r in plugin.records.by_id.values()]
            writer.add(Path(report), model_check.documents(built, records, whole))
        return result

    def pytest_qconform_summary(self, terminalreporter, config: pytest.Config) -> None:
        """The model's section: the groups not judged (each once) and the whole-model check."""
        built = config.stash[MODEL]
        terminalreporter.section("qconform model")
        for line in built.not_judged_lines():
            terminalreporter.write_line(line)
        whole = config.stash.get(WHOLE, None)
        if whole is not None:
            for line in whole.lines(built.info):
                terminalreporter.write_line(line, red=whole.first is not None and "first group" in line)
        report = config.getoption("report", None)
        if report:
            terminalreporter.write_line(f"wrote {Path(report) / mc.GROUPS_FILE}")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        temp = config.stash.get(_TEMP, None)
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)


__all__ = ["MODEL", "WHOLE", "built_of", "model_corpus", "pytest_addoption", "pytest_configure"]
