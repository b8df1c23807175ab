"""Property-based differential testing: random programs drawn from the rule table (``generator``),
each run through every engine and checked against the others and finite differences (``checks``).
``make fuzz`` runs the long profile (``run``); ``known`` lists what is known broken."""
