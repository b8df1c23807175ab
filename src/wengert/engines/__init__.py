"""The engines: the reverse-mode tape, dual numbers (forward mode), and what they share (traced
values' operators, array assignment). Built on the core and the rule table, which know none of them.
"""
