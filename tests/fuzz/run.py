"""``make fuzz``: the property tests of ``suites.py`` on fresh random programs, round after round,
until ``--minutes`` are spent; writes a report (programs tried, failures with their shrunk program)
and exits non-zero when anything failed.

    python -m tests.fuzz.run --minutes 30 --report build/fuzz-report.md
"""

import argparse
import os
import sys
import time
import traceback

from hypothesis import settings

from . import known, profiles  # noqa: F401 - profiles registers "fuzz"
from .suites import STATS, SUITES, property_test


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--report", default="build/fuzz-report.md")
    parser.add_argument("--examples", type=int, default=200, help="programs per suite and round")
    opts = parser.parse_args(argv)
    profile = settings(settings.get_profile("fuzz"), max_examples=opts.examples)
    end = time.monotonic() + 60 * opts.minutes
    start = time.monotonic()
    failures = {}  # first line of the error -> (suite, full text)
    rounds = 0
    while time.monotonic() < end:
        rounds += 1
        for name in SUITES:
            if time.monotonic() >= end:
                break
            try:
                property_test(name, profile)()
            except Exception as e:  # noqa: BLE001 - every failure goes to the report
                text = "".join(traceback.format_exception(e))
                head = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                failures.setdefault(head, (name, text))
                print(f"[fuzz] {name}: {head}", file=sys.stderr, flush=True)
            write_report(opts.report, time.monotonic() - start, rounds, failures, quiet=True)  # so far
        print(f"[fuzz] round {rounds}: {STATS['programs']} programs, {len(failures)} failures",
              file=sys.stderr, flush=True)
    write_report(opts.report, time.monotonic() - start, rounds, failures)
    return 1 if failures else 0


def write_report(path, seconds, rounds, failures, quiet=False):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    pending = [k for k in known.KNOWN_BROKEN if not known.enabled(k)]
    features = sorted((n, c) for n, c in STATS.items() if ":" in n)
    lines = [
        "# Fuzz report", "",
        f"- time: {seconds / 60:.1f} minutes, {rounds} rounds over {len(SUITES)} suites",
        f"- programs tried: {STATS['programs']}",
        f"- failures: {len(failures)}",
        f"- known broken, checks left out where they apply: {', '.join(k.key for k in pending) or 'none'}",
        "",
    ]
    for head, (suite, text) in failures.items():
        lines += [f"## {suite}: {head}", "", "```", text.rstrip(), "```", ""]
    lines += ["## Features exercised (programs containing each)", ""]
    lines += [f"- `{n}`: {c}" for n, c in features]
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    if not quiet:
        print(f"[fuzz] {STATS['programs']} programs, {len(failures)} failures: {path}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
