"""``qconform certify --model FILE``: a user's own quantized model certified group by group, and whole.

Why: the corpus proves an op on qconform's own parameters; a vendor's customer asks about *their*
model -- its scales, zero points, weights and shapes -- and where its output starts to differ. The
model is read and drafted into a corpus of its own groups by ``qconform.gating.model_cases`` (what
``pytest --runner NAME --model FILE`` shares), written under ``DIR/model-corpus/`` and certified
with the unchanged pipeline (``apps.certify``: the same engine, comparison, diagnosis and report);
then, before the report is written, the whole model runs on the runner and the first group whose
output leaves the permitted readings is named (``qconform.gating.model_check``): the finding is in
report.json's gate, so the exit status, the certificate and summary.md agree. ``DIR/groups.md`` lists every group with its
nodes and verdicts, or why it could not be judged, and the whole-model check; it and the reproducers
(each deviating group's first deviating case alone, and the check's, in ``DIR/model-check/``) are
listed in SHA256SUMS with the report's files.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from qconform.apps import certify
from qconform.gating import model_cases as mc
from qconform.gating import model_check
from qconform.gating import model_groups as mg


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, metavar="FILE",
                   help="certify this quantized ONNX model, group by group at its own parameters, and whole (instead "
                        "of the corpus); the cases are written to DIR/model-corpus, the groups to DIR/groups.md")
    p.add_argument("--inputs", default=None, metavar="FILE.npz",
                   help="with --model: a calibration input (graph inputs by name); each group is also judged on "
                        "the values it receives from it, and the whole model is run on it")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    """Read and check the model, draft and evaluate its groups, write the corpus and certify it,
    checking the model whole before the report is written; 1 where the whole-model check finds a
    deviating group (its gate fails)."""
    def usage(msg: str) -> int:
        print(f"qconform certify: {msg}", file=sys.stderr)
        return 2

    if args.extra:
        return usage(f"--model runs through qconform's engine: {' '.join(args.extra)} is not available with it")
    if args.golden or args.offline:
        return usage("--model makes its own corpus: it takes no --golden or --offline")
    report = Path(args.report)
    try:
        built = mc.build(args.model, args.inputs)
    except mg.ModelError as exc:
        return usage(str(exc))
    for line in built.not_judged_lines():
        print(f"qconform certify: {line}", file=sys.stderr)
    if not built.cases:
        report.mkdir(parents=True, exist_ok=True)
        none = model_check.Check(why="no group of the model is judged")
        (report / mc.GROUPS_FILE).write_text(model_check.groups_md(built, [], none))
        return usage(f"{args.model}: no group of the model can be judged (see {report / mc.GROUPS_FILE})")
    mc.write_corpus(built, report / mc.CORPUS_DIR)
    args.golden = str(report / mc.CORPUS_DIR)

    def scope(ran_in_full: bool) -> dict:
        """The model as the report names it (a model states no conformance), called by ``certify`` once
        the cases have run and before the report is written: the whole-model check runs here, so its
        finding is in report.json's gate and exit status, the certificate and summary.md."""
        if ran_in_full:
            built.whole = _whole(args, built)
        return built.scope()

    args.model_scope = scope
    status = certify.main(args, argv)
    if not (report / "report.json").is_file():  # refused before any case ran: nothing more to say
        return status
    whole = built.whole
    data = json.loads((report / "report.json").read_text())
    diagnosed = {f["id"]: f for f in data.get("failures") or ()}  # a failure's diagnosis is in its entry
    records = [{**rec, **{k: diagnosed[rec["id"]].get(k) for k in ("diagnosis", "diagnosis_step")}}
               if rec.get("id") in diagnosed else rec for rec in data.get("cases", [])]
    from qconform.report import writer

    for p in writer.add(report, model_check.documents(built, records, whole)):
        print(f"wrote {p}")
    if whole is not None:  # its finding already failed the gate, and so the exit status (model_check.gate)
        for line in whole.lines(built.info):
            print(line)
    return status


def _whole(args: argparse.Namespace, built: mc.Built) -> model_check.Check | None:
    """The whole-model check on the runner ``--runner`` names, resolved again in this process (None
    where it cannot be: said in one line)."""
    from qconform.runner import RunnerError, parse_options, resolve

    try:
        runner = resolve(args.runner, parse_options(args.runner_opt))
    except RunnerError as exc:
        print(f"qconform certify: whole-model check: {exc}", file=sys.stderr)
        return None
    return model_check.check(built, runner, strict_nan=bool(args.strict_nan), profile=args.profile,
                             diagnose=args.diagnose == "on")


__all__ = ["add_arguments", "main"]
