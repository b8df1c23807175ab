"""Command line: ``python -m wengert demo``."""

import argparse
import sys


def demo(args):
    """The first seed's example: z = x*y + sin(x) at (0.5, 4.2), on a tape, in reverse and forward mode."""
    import wengert as wg
    import wengert.numpy as wnp

    print("wengert demo: z = x * y + sin(x) at x = 0.5, y = 4.2\n")
    tape = wg.Tape()
    x = tape.var(0.5)
    y = tape.var(4.2)
    z = x * y + wnp.sin(x)
    print("The tape (Wengert list), as a program:")
    print("  " + tape.listing({id(x): "x", id(y): "y", id(z): "z"}).replace("\n", "\n  "))
    print(f"\nz = {z.value!r}")

    g = z.grad()
    print("\nReverse mode (one backward sweep over the tape gives both):")
    print(f"  dz/dx = {g.wrt(x)!r}")
    print(f"  dz/dy = {g.wrt(y)!r}")

    def f(x, y):
        return x * y + wnp.sin(x)

    _, dzdx = wg.jvp(f, (0.5, 4.2), (1.0, 0.0))
    _, dzdy = wg.jvp(f, (0.5, 4.2), (0.0, 1.0))
    print("\nForward mode (dual numbers, one sweep per seed):")
    print(f"  seed dx=1, dy=0: dz/dx = {dzdx!r}")
    print(f"  seed dx=0, dy=1: dz/dy = {dzdy!r}")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m wengert", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run the demo").set_defaults(run=demo)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
