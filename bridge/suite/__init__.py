"""`nri-webhook-bridge test`: declarative policy tests on `try`'s engine (docs/policy-tests.md).

Owns nothing itself: `document` (the suite document), `load` (a suite file checked through:
exit 2), `expect` (expectations against `try`'s results, diffs), `run` (one trial per case),
`junit` (the XML), `suite_command` (arguments, output, exit codes), `document_schema`
(schemas/test/ from the document). Must not be imported by the plugin or by `try`.
"""
