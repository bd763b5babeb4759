"""Webhook delegation: NRI events become HTTP calls to policy services, replies become NRI answers.

Owns nothing itself: `specs` (the config section, validated), `selector` (which pods),
`client` + `http1` (kept-alive HTTP/1.1 connections, replies parsed by httptools), `breaker`,
`webhook` (one call), `checked` (replies already checked, remembered by their bytes),
`guard` + `reply_walk` + `values` + `kinds` (reply checks, allow list),
`reply_merge` (ownership, conflicts), `failures` (why a call failed), `log_text` (reply text
for a log line), `webhook_handler` (the EventHandler: calls the webhooks one after another and
merges their replies). The request envelope is the contract's (`bridge.contract.request_body`).
"""
