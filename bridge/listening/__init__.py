"""HTTP listeners both products serve: who may talk to them and how much they may send.

Owns `peer_creds` (SO_PEERCRED of a Unix-socket peer and the uid/gid rule), `http_guard` (the
ASGI layer in front of every app: peer rule, bearer token, JSON-only state changes, Host and
Origin, body size, environment readers), `bounded_protocol` (uvicorn's httptools protocol with a
header timeout, a body timeout and a connection cap per listener), `listener_config` (the
settings of one listener and the start-up refusal of an unauthenticated TCP listener),
`auth_files` (loading the token, certificate and key files) and `prompt_server` (the uvicorn
server that stops as soon as it is asked).

Must not: import anything else of the bridge (the policy server uses this package too), or know
any route beyond the per-path body limits and the redaction marker it is handed.
"""
