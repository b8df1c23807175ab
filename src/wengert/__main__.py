"""Command line (``wengert`` or ``python -m wengert``): ``demo`` (an MLP learns the digits),
``example`` (a tape example in reverse and forward mode), ``rules`` (the rule table at a glance),
``adjoint FILE.py:FUNCTION`` (a derivative program built from source); ``--version``."""

import argparse
import os
import sys

import wengert as wg
import wengert.numpy as wnp
from wengert.api.checkpointing.schedules import POLICIES
from wengert.cli import adjoint as cli_adjoint
from wengert.cli import demo as cli_demo
from wengert.cli import rules as cli_rules


def example(args):
    """A first example: z = x*y + sin(x) at (0.5, 4.2), on a tape, in reverse and forward mode."""
    print("wengert: z = x * y + sin(x) at x = 0.5, y = 4.2\n")
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
    print("\nForward mode (dual numbers, one sweep per input direction):")
    print(f"  direction dx=1, dy=0: dz/dx = {dzdx!r}")
    print(f"  direction dx=0, dy=1: dz/dy = {dzdy!r}")
    return 0


def demo(args):
    """Train an MLP on scikit-learn's digits (see ``wengert.cli.demo``)."""
    return cli_demo.run(args)


def adjoint(args):
    """Print the derivative program of FILE.py:FUNCTION, built from its source."""
    return cli_adjoint.run(args)


def rules(args):
    """Print the rule table: every differentiable primitive, its derivatives, modes and facts."""
    return cli_rules.run(args)


def _positive(kind):
    def check(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive {kind.__name__}, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
        return value

    check.__name__ = f"positive {kind.__name__}"
    return check


def _seed_value(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


def build_parser():
    """The command line's parser: one subcommand per entry point, each with a one-line help."""
    prog = "wengert" if os.path.basename(sys.argv[0] or "") == "wengert" else "python -m wengert"
    parser = argparse.ArgumentParser(
        prog=prog,
        description="wengert: exact derivatives of Python/NumPy programs. Run a subcommand with --help "
                    "for its options.")
    parser.add_argument("--version", action="version", version=f"wengert {wg.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    d = sub.add_parser("demo", help="train an MLP on the digits data (the demo extra)",
                       description="Train an MLP on scikit-learn's digits; needs the demo extra "
                                   "(pip install \".[demo]\" in a clone of wengert).")
    d.add_argument("--epochs", type=_positive(int), default=30, help="passes over the training set (30)")
    d.add_argument("--hidden", type=_positive(int), default=256, help="width of the hidden layer (256)")
    d.add_argument("--lr", type=_positive(float), default=2e-3, help="Adam's learning rate (0.002)")
    d.add_argument("--seed", type=_seed_value, default=0, help="seed of the split, init and batches (0)")
    d.add_argument("--out", default="wengert-demo", help="folder for the outputs (./wengert-demo/)")
    d.add_argument("--model", choices=("mlp", "cnn"), default="mlp",
                   help="mlp (default), or cnn: a small convolutional network on the 8x8 images")
    d.set_defaults(run=demo)
    s = sub.add_parser("example", help="z = x*y + sin(x) on a tape, reverse and forward mode",
                       description=example.__doc__)
    s.set_defaults(run=example)
    r = sub.add_parser("rules", help="every differentiable primitive: derivatives, modes and facts",
                       description=rules.__doc__)
    r.set_defaults(run=rules)
    a = sub.add_parser("adjoint", help="the derivative program of FILE.py:FUNCTION, as Python",
                       description="Print the derivative program of FILE.py:FUNCTION, built from its "
                                   "source and specialised to example arguments (--args).")
    a.add_argument("target", metavar="FILE.py:FUNCTION")
    a.add_argument("--table", action="store_true", help="each forward statement beside its reverse "
                                                        "counterpart")
    a.add_argument("--args", default=None, help="example arguments as in a call, by position or name, "
                                                "e.g. 'v=np.ones(3), n=4' (np is NumPy; the others: "
                                                "defaults, else 1.0)")
    a.add_argument("--argnums", default="0", help="the arguments to differentiate, e.g. 0 or 0,1 (0)")
    a.add_argument("--jvp", action="store_true", help="print the forward-mode (tangent) program instead")
    a.add_argument("--checkpoint", default="all", choices=POLICIES,
                   help="how loops' reverse passes get their iterations' values (all: a stack)")
    a.add_argument("--snapshots", type=_positive(int), default=None, help="binomial: states kept per loop")
    a.set_defaults(run=adjoint)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
