"""The rule-table cases of each op family, one module each: a ``CASES`` dict
(``name -> [(function, args), ...]``) and optionally ``COMPOSED``, merged by
``tests/rules/test_rule_table.py``."""
