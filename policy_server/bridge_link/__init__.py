"""The link back to the bridge: its control API client and the queue of updates to push.

Owns every call the policy server makes to the bridge (``control_client``: ``GET /v1/state``,
``POST /v1/updates``) and their ordered delivery outside the request path (``pusher``).

Must not: evaluate policies or touch the node.
"""
