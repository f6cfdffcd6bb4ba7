"""The ``qconform`` console script: corpus regeneration and certification shortcuts."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from conformance import corpus
from conformance.plugin import default_golden


def regenerate(root: Path) -> tuple[int, str]:
    """Generators -> oracle -> corpus. Deterministic: same bytes on every machine."""
    from conformance import oracle
    from conformance.generators import all_drafts

    cases = [oracle.evaluate(d) for d in all_drafts()]
    return len(cases), corpus.write(cases, root)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="qconform", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("golden", help="the golden corpus")
    gsub = g.add_subparsers(dest="golden_cmd", required=True)
    regen = gsub.add_parser("regen", help="regenerate golden/ from the generators and the oracle")
    regen.add_argument("--dir", type=Path, default=None)
    verify = gsub.add_parser("verify", help="check golden/ against its MANIFEST")
    verify.add_argument("--dir", type=Path, default=None)
    cert = sub.add_parser("certify", help="run the suite against a runner and write a report")
    cert.add_argument("--runner", required=True)
    cert.add_argument("pytest_args", nargs=argparse.REMAINDER, help="further pytest arguments")
    args = parser.parse_args(argv)

    if args.cmd == "golden":
        root = args.dir or default_golden()
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
    if args.cmd == "certify":
        import pytest

        return int(pytest.main([f"--runner={args.runner}", "-p", "no:cacheprovider", *args.pytest_args]))
    return 2


if __name__ == "__main__":
    sys.exit(main())
