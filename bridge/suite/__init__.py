"""`nri-webhook-bridge test`: declarative policy tests on `try`'s engine (docs/policy-tests.md).

Owns nothing itself: model (the suite document), load (a suite file checked through: exit 2),
expect (expectations against `try`'s results, diffs), run (one trial per case), junit (the
XML), command (arguments, output, exit codes), schema (schemas/test/ from the model). Must not
be imported by the plugin or by `try`.
"""
