"""``python -m wengert``'s subcommands: the demo, the derivative program built from a function's
source (``adjoint``), the rule table at a glance."""
