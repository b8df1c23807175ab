"""The scripts in examples/, imported as modules (they are not a package) for the tests that run them."""

import importlib.util
import pathlib

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def load_example(filename):
    """``examples/<filename>`` imported as a module of its stem's name."""
    path = EXAMPLES / filename
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
