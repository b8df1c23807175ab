"""``python -m wengert``'s subcommands: the demo and the rule table at a glance."""
