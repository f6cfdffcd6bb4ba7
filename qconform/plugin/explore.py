"""Feature module: ``pytest --runner=X --explore`` — hypothesis property tests with the oracle as
live golden, one test per QuantizeLinear/DequantizeLinear version.

Each example is a whole draft (``strategies.drafts``: combination, shape, granularity, data,
scales, zero point, attributes); the oracle computes its readings, the runner runs the model and
``compare`` judges it exactly as for a corpus case. A failure shrinks to a minimal draft and is
saved as JSON (raw codes, bit-exact) under ``--explore-dir``; ``qconform explore promote FILE``
turns it into a corpus case (family "explored"). Runs are derandomized (the same examples on
every machine); ``--explore-examples`` is the budget per op version. With ``--explore`` the
corpus cases are deselected: this is a search, not the certification run."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from qconform import schemas
from qconform.generators import qdq
from qconform.plugin.core import plugin_of
from qconform.plugin.options import PLUGIN
from qconform.verdicts import CRASHED, ERROR, INFO, PASS, TIMEOUT, UNSUPPORTED

# hypothesis and the strategies are imported where --explore runs: a certification run does not pay
# for them at start-up.

DEFAULT_DIR = ".qconform-explore"


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("qconform-explore", "qconform exploration (hypothesis, oracle as live golden)")
    g.addoption("--explore", action="store_true",
                help="run hypothesis property tests against --runner instead of the corpus")
    g.addoption("--explore-examples", type=int, default=100, metavar="N",
                help="examples per op version (default 100)")
    g.addoption("--explore-dir", default=DEFAULT_DIR, metavar="DIR",
                help=f"where shrunk failures are saved as JSON drafts (default {DEFAULT_DIR}/)")


def _on(config: pytest.Config) -> bool:
    return bool(config.getoption("explore", False)) and plugin_of(config) is not None


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    config = parent.config
    if _on(config) and file_path.name == "MANIFEST" and \
            file_path.parent.resolve() == config.stash[PLUGIN].index.root.resolve():
        return ExploreFile.from_parent(parent, path=file_path, name="explore")
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _on(config):
        return
    drop = [i for i in items if not isinstance(i, ExploreItem)]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = [i for i in items if isinstance(i, ExploreItem)]


class ExploreFile(pytest.File):
    def collect(self):
        for spec in schemas.all_specs():
            if qdq.is_qdq(spec):
                yield ExploreItem.from_parent(self, name=spec.key, spec=spec)


class ExploreFailure(AssertionError):
    pass


class ExploreItem(pytest.Item):
    def __init__(self, *, spec, **kw) -> None:
        super().__init__(**kw)
        self.spec = spec
        self.saved: Path | None = None

    def _save(self, draft) -> Path:
        from qconform.generators.explored import to_json

        out = Path(self.config.getoption("explore_dir"))
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{self.spec.key}.json"
        path.write_text(json.dumps(to_json(draft), indent=1) + "\n")
        self.saved = path
        return path

    def check(self, draft) -> None:
        """One example: the oracle's case judged by the engine every application uses."""
        from hypothesis import reject

        from qconform.oracle import evaluate

        case = evaluate(draft)
        res = self._pipeline().judge(case)
        if res.verdict in (UNSUPPORTED, INFO):  # the runner declines it; a model the text makes invalid
            reject()
        if res.verdict in (ERROR, CRASHED, TIMEOUT):
            path = self._save(draft)
            raise ExploreFailure(f"runner raised: {res.record.problem}\n  saved {path}") from None
        if res.verdict != PASS:
            path = self._save(draft)
            raise ExploreFailure(f"{res.detail}\n  saved {path}; add it to the corpus with "
                                 f"`qconform explore promote {path}`")

    def _pipeline(self):
        from qconform.execution import Pipeline

        if getattr(self, "_engine", None) is None:
            self._engine = Pipeline.local(self.config.stash[PLUGIN].runner, strict_nan=self.config.getoption("strict_nan"),
                                          profile=self.config.getoption("profile"))
        return self._engine

    def runtest(self) -> None:
        from hypothesis import HealthCheck, Phase, given, settings
        from hypothesis.errors import Unsatisfiable

        from qconform.generators.strategies import drafts

        budget = self.config.getoption("explore_examples")
        prop = settings(max_examples=budget, derandomize=True, database=None, deadline=None,
                        phases=(Phase.generate, Phase.shrink), print_blob=False, report_multiple_bugs=False,
                        suppress_health_check=list(HealthCheck))(given(drafts(self.spec))(self.check))
        try:
            prop()
        except Unsatisfiable:
            pytest.skip(f"{self.spec.key}: the runner supports none of the drawn models")

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ExploreFailure):
            return f"{self.spec.key}: minimal failing example\n{excinfo.value}"
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"explore {self.spec.key}"
