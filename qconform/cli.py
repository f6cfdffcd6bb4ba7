"""qconform: bit-exact conformance for the ONNX quantization operators.

Certify a runner (the whole corpus, a report directory written), keep a baseline of accepted
deviations, scaffold a runner, regenerate or verify the golden corpus, sweep whole input domains.
The test run itself is pytest: pytest --runner=NAME (see qconform/docs/runners.md)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from qconform import corpus


def regenerate(root: Path, jobs: int | None = None) -> tuple[int, str]:
    """Generators -> oracle -> corpus. Deterministic: same bytes on every machine, whatever ``jobs``
    (cases are evaluated independently and written sorted by id)."""
    import multiprocessing
    import os

    from qconform import oracle
    from qconform.generators import all_drafts

    drafts = list(all_drafts())
    jobs = jobs or os.cpu_count() or 1
    if jobs > 1:
        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            cases = pool.map(oracle.evaluate, drafts, chunksize=64)
    else:
        cases = [oracle.evaluate(d) for d in drafts]
    return len(cases), corpus.write(cases, root)


def _facts(args) -> int:
    from qconform import facts
    from qconform.apps import facts_drift as drift
    from qconform.facts import docs

    try:
        if args.facts_cmd == "drift":
            return drift.main(args)
        if args.facts_cmd == "packing":
            from qconform.apps import packing_check

            return packing_check.main(args)
        files = facts.load_all()
        if args.facts_cmd == "render":
            docs.RENDERED.write_text(docs.render(files, facts.SOURCES))
            print(f"wrote {docs.RENDERED}")
        else:
            for ff in files.values():
                print(f"wrote {facts.write(ff)}")
    except facts.FactsError as exc:
        print(f"qconform: {exc}", file=sys.stderr)
        return 2
    return 0


def _version() -> str:
    """qconform's version and the corpus it ships (what a certificate is measured against)."""
    from qconform import __version__, corpus

    try:
        idx = corpus.index(corpus.DEFAULT_ROOT)
        shipped = f"corpus {idx.digest[:12]}… ({len(idx):,} cases)"
    except corpus.CorpusError as exc:
        shipped = f"corpus unreadable: {exc}"
    return f"qconform {__version__}, {shipped}"


class _Version(argparse.Action):
    """``--version``, read only when asked (the corpus index is not read for every command)."""

    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        print(_version())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """Every subcommand and its options."""
    parser = argparse.ArgumentParser(prog="qconform", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_Version, help="qconform's version and the corpus it ships")
    sub = parser.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("golden", help="the golden corpus")
    gsub = g.add_subparsers(dest="golden_cmd", required=True)
    regen = gsub.add_parser("regen", help="regenerate qconform/golden/ from the generators and the oracle")
    regen.add_argument("--dir", type=Path, default=None)
    verify = gsub.add_parser("verify", help="check qconform/golden/ against its MANIFEST")
    verify.add_argument("--dir", type=Path, default=None)
    from qconform.apps import certify

    cert = sub.add_parser(
        "certify", help="run the corpus against a runner and write a report directory",
        description="Run the golden corpus (or --case globs) against a runner through qconform's engine, "
                    "-j N runner workers, each case isolated, and write report.json, report.html and summary.md: "
                    "the report pytest --runner=NAME --report=DIR writes, without a pytest item per case. "
                    "Options only pytest knows (-m, -k, -n, --from-report, ...) run it through pytest instead, "
                    "every option passed on. With --model FILE: the user's own quantized model, group by "
                    "group, at its own parameters.")
    certify.add_arguments(cert)
    from qconform.apps import model_certify

    model_certify.add_arguments(cert)
    imp = sub.add_parser(
        "import-results", help="judge the outputs a device wrote offline into an export, and write a report",
        description="For a device with no network: after `qconform export backend-test DIR`, the device team's own "
                    "tool writes each case's outputs as DIR/<case dir>/actual/output_N.pb (or actual/unsupported.txt, "
                    "actual/error.txt) and DIR/device.json; this judges them through qconform's engine into the "
                    "report a live run writes (qconform certify --offline DIR). Format: qconform/docs/runners.md §11.")
    imp.add_argument("results", metavar="DIR", help="the export, with the device's actual/ folders")
    certify.add_arguments(imp)
    from qconform import worker as worker_mod

    worker_mod.add_arguments(sub.add_parser(
        "worker", help="serve a runner on a TCP port, for a device that cannot host the suite",
        description="Serve a runner to a controller elsewhere (qconform certify --runner remote:HOST:PORT): "
                    "models and tensors over the versioned protocol of qconform/docs/protocol.md, the runner "
                    "in a child process restarted after a crash or hang. Binds to loopback unless --host says "
                    "otherwise; any other address needs a shared secret."))
    sec = sub.add_parser("secret", help="write a new shared secret for qconform worker and its controller",
                         description="Write 64 random hex digits (256 bits) to FILE, readable by its owner only "
                                     "(mode 600); give the same file to the worker (--secret-file) and the "
                                     "controller (--runner-opt secret_file=...). FILE must not exist.")
    sec.add_argument("path", metavar="FILE")
    init = sub.add_parser("init-runner", help="write a starter runner file to fill in for your runtime")
    init.add_argument("path", type=Path, help="file to write, e.g. my_runner.py")
    init.add_argument("--bytes", action="store_true",
                      help="the starter for a binding that speaks raw bytes (qconform.adapt)")
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    from qconform.apps import baseline

    baseline.add_arguments(sub.add_parser("baseline", help="create or refresh a baseline of accepted deviations"))
    rep = sub.add_parser("report", help="work with report.json files")
    rsub = rep.add_subparsers(dest="report_cmd", required=True)
    rdiff = rsub.add_parser("diff", help="what regressed, got fixed or changed support status "
                                         "(exit 1 on regressions)")
    rdiff.add_argument("old", type=Path, help="the earlier report.json")
    rdiff.add_argument("new", type=Path, help="the later report.json")
    rdiff.add_argument("--json", action="store_true", help="print the differences as JSON")
    rver = rsub.add_parser("verify", help="check a report directory was not edited since it was written "
                                          "(exit 1 when it was)")
    rver.add_argument("dir", type=Path, help="the report directory (or its report.json)")
    from qconform.sweep import cli as sweep

    sweep.add_arguments(sub.add_parser("sweep", help="exhaustive sweeps of a runner against digest goldens"))
    cov = sub.add_parser("coverage", help="op x version x type table of cases per family; exit 1 on gaps")
    cov.add_argument("--dir", type=Path, default=None, help="golden corpus directory")
    cov.add_argument("--missing", action="store_true", help="list only the applicable pairs without a case")
    from qconform.apps import scoreboard

    scoreboard.add_arguments(sub.add_parser(
        "scoreboard", help="run every installed bundled runtime over the corpus and compare them "
                           "(scoreboard.md, scoreboard.html); --check: exit 1 when the scoreboard is stale",
        description="One `qconform certify --runner NAME --report DIR/NAME --pack` run per installed bundled "
                    "runtime (--runners lists them; with -m, the same through pytest), then one comparison of "
                    "their report.json files. Exit 0 once written, whatever the runtimes did; 1 when a runtime "
                    "produced no report; 2 on bad arguments."))
    from qconform.apps import findings

    findings.add_arguments(sub.add_parser(
        "findings", help="upstream-ready reproducers: per deviation group of a runtime, a directory with the "
                         "model, inputs, expected and actual outputs and a standalone repro.py (qconform/docs/findings)",
        description="One directory per deviation group: onnxruntime and onnx-reference from their facts, other "
                    "runtimes from --from-report DIR/report.json (or a run of the corpus). Each repro.py is run "
                    "once and must show the mismatch. Then index.md, with the status from status.toml."))
    fct = sub.add_parser("facts", help="what qconform knows about other runtimes (qconform/facts/*.toml)")
    fsub = fct.add_subparsers(dest="facts_cmd", required=True)
    from qconform.apps import facts_drift as drift

    drift.add_arguments(fsub.add_parser(
        "drift", help="run the bundled third-party runners and propose the facts to add, close or re-bound "
                      "(exit 1 when they drifted)"))
    from qconform.apps import packing_check

    packing_check.add_arguments(fsub.add_parser(
        "packing", help="whether a runtime gives a packed model's nodes the same outputs as their single models "
                        "(what certify --pack rests on); --write keeps it in the runtime's facts file"))
    fsub.add_parser("render", help="rewrite qconform/docs/facts.md from the facts files")
    fsub.add_parser("fmt", help="rewrite the facts files in their canonical form")
    exp = sub.add_parser("explore", help="findings of pytest --explore")
    esub = exp.add_subparsers(dest="explore_cmd", required=True)
    promote = esub.add_parser("promote", help="turn a saved draft into a corpus case (family 'explored')")
    promote.add_argument("file", type=Path, help="a JSON draft saved by pytest --explore")
    promote.add_argument("--dir", type=Path, default=None, help="destination (default qconform/golden/explored)")
    graphs = esub.add_parser("graphs", add_help=False,
                             help="draw QDQ graphs as a quantiser would and keep those a runner computes otherwise "
                                  "(qconform explore graphs --help)")
    from qconform.apps import backend_export

    xport = sub.add_parser("export", help="the golden corpus in other tools' layouts")
    xsub = xport.add_subparsers(dest="export_cmd", required=True)
    backend_export.add_arguments(xsub.add_parser(
        "backend-test", help="the corpus as ONNX backend-test directories, one per case and permitted reading",
        description="Write the golden corpus (or a --case/-m selection) in ONNX's backend-test layout: "
                    "OUT/conformance/test_<case>[__<reading>]/ (model.onnx, test_data_set_0/), loadable with "
                    "onnx.backend.test.loader.load_model_tests(data_dir=OUT, kind='conformance'); the "
                    "implementation-defined cases go to OUT/information. Exit 2 on an empty selection or an "
                    "OUT that is neither empty nor an earlier export (--force replaces one)."))
    sign = xsub.add_parser(
        "sign", help="sign a device's offline results with the shared secret (results.sha256, results.mac)",
        description="On the device, after its tool wrote actual/ folders and device.json into an export, last: "
                    "list every file of the folder (index.json, the models and inputs, actual/, device.json) with "
                    "its SHA-256 (results.sha256) and write that list's HMAC-SHA256 under the shared secret "
                    "(results.mac), so qconform import-results --secret-file FILE can show the device's identity "
                    "as verified. A device tool without qconform does the same with sha256sum and an HMAC "
                    "(qconform/docs/runners.md §11).")
    sign.add_argument("results", type=Path, metavar="DIR", help="the export with the device's results")
    sign.add_argument("--secret-file", default=None, metavar="FILE", help="the shared secret (else $QCONFORM_WORKER_SECRET)")
    _describe_subcommands(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    from qconform.apps import backend_export, baseline, certify, findings, scoreboard
    from qconform.sweep import cli as sweep

    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:2] == ["explore", "graphs"]:  # its own options (qconform.apps.explore_graphs)
        from qconform.apps import explore_graphs

        return explore_graphs.main(argv[2:])
    args, extra = parser.parse_known_args(argv)
    if extra and args.cmd != "certify":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = [a for a in extra if a != "--"]

    if args.cmd == "golden":
        root = args.dir or corpus.DEFAULT_ROOT
        try:
            if args.golden_cmd == "regen":
                n, digest = regenerate(root)
                print(f"wrote {n} cases to {root} (corpus digest {digest})")
            else:
                print(f"{root}: OK, corpus digest {corpus.verify(root)}")
        except corpus.CorpusError as exc:
            print(f"qconform: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.cmd == "report" and args.report_cmd == "verify":
        from qconform.report import certificate

        problems = certificate.verify(args.dir)
        for p in problems:
            print(f"qconform: {p}", file=sys.stderr)
        if not problems:
            print(f"{args.dir}: intact (report.json content and every file in {certificate.SUMS} match)")
        return 1 if problems else 0
    if args.cmd == "report":
        from qconform.apps import report_diff
        from qconform.report.model import ReportError

        try:
            return report_diff.main(args.old, args.new, as_json=args.json)
        except ReportError as exc:
            print(f"qconform: {exc}", file=sys.stderr)
            return 2
    if args.cmd == "sweep":
        return sweep.main(args)
    if args.cmd == "coverage":
        from qconform import coverage

        return coverage.main(args.dir or corpus.DEFAULT_ROOT, only_missing=args.missing)
    if args.cmd == "facts":
        return _facts(args)
    if args.cmd == "explore":
        from qconform.apps.explore import promote_main

        return promote_main(args.file, args.dir)
    if args.cmd == "certify" and (args.model or args.inputs):
        from qconform.apps import model_certify

        if not args.model:
            parser.error("--inputs FILE.npz needs --model FILE")
        return model_certify.main(args, argv[argv.index("certify") + 1:])
    if args.cmd == "certify":
        return certify.main(args, argv[argv.index("certify") + 1:])
    if args.cmd == "import-results":
        if args.offline and args.offline != args.results:
            parser.error("import-results takes the results folder once (DIR), not --offline too")
        args.offline = args.results
        return certify.main(args, argv[argv.index("import-results") + 1:])
    if args.cmd == "worker":
        from qconform import worker as worker_mod

        return worker_mod.main(args)
    if args.cmd == "secret":
        from qconform import wire

        try:
            wire.new_secret(args.path)
        except OSError as exc:
            print(f"qconform secret: {args.path}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        print(f"wrote a new shared secret to {args.path} (mode 600); copy it to the other side as securely")
        return 0
    if args.cmd == "init-runner":
        return init_runner(args.path, bytes_binding=args.bytes, force=args.force)
    if args.cmd == "baseline":
        return baseline.main(args)
    if args.cmd == "scoreboard":
        return scoreboard.main(args)
    if args.cmd == "export" and args.export_cmd == "sign":
        from qconform import offline, wire

        try:
            secret = wire.read_secret(args.secret_file)
            if secret is None:
                raise ValueError(f"no shared secret: give --secret-file FILE or ${wire.SECRET_ENV}")
            offline.sign(args.results, secret)
        except (OSError, ValueError) as exc:
            print(f"qconform export sign: {exc}", file=sys.stderr)
            return 2
        print(f"signed {len(offline.result_files(args.results))} file(s) in {args.results}")
        return 0
    if args.cmd == "export":
        return backend_export.main(args)
    if args.cmd == "findings":
        return findings.main(args)
    return 2


def subcommands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every subcommand below ``parser``: (its words, its parser, its one-line help), depth first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield path + (name,), sub, helps.get(name)
                yield from subcommands(sub, path + (name,))


def _describe_subcommands(parser: argparse.ArgumentParser) -> None:
    """Every subcommand's own --help says what it does: its one-line help, where it has no longer
    description of its own."""
    for _, sub, text in subcommands(parser):
        if not sub.description and text:
            sub.description = text[0].upper() + text[1:] + ("" if text.endswith(".") else ".")


def init_runner(path: Path, *, bytes_binding: bool = False, force: bool = False) -> int:
    """Copy a shipped example runner, ready to run as is and to edit."""
    from importlib.resources import files

    name, cls = ("bytes_runner.py", "BytesRunner") if bytes_binding else ("my_runner.py", "MyRunner")
    if path.exists() and not force:
        print(f"qconform: {path} exists; use --force to overwrite it", file=sys.stderr)
        return 2
    path.write_text(files("qconform").joinpath("examples", name).read_text(encoding="utf-8"), encoding="utf-8")
    print(f"wrote {path} (a copy of qconform/examples/{name})")
    print(f"try it:  pytest --runner={path}:{cls} -k \"QuantizeLinear-13\"")
    print("then replace its runtime calls with yours; the guide: qconform/docs/runners.md")
    return 0


def run() -> None:
    """Console entry point: a closed pipe (``qconform coverage | head``) ends quietly."""
    import os

    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush must not fail again
        code = 0
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    run()
