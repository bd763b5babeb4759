"""The HTTP edge: the ASGI app, the hot webhook route and uvicorn's protocol wiring.

Owns routes, status codes and bodies on the wire (``asgi``: FastAPI for everything but the
webhook POST, which ``hot_route`` serves as plain ASGI in front of it) and the single-write
response protocol (``http_protocol``).

Must not: hold policy logic or node effects; those are the service's and the engine's.
"""
