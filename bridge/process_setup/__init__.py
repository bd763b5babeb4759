"""What a process of either program sets up around its work, shared by both programs.

Owns: `stop_signals` (the SIGTERM/SIGINT latch both entry points install first), `logformat`
(the text and JSON log line formats both write) and `gc_pause` (the cyclic garbage collector
held off while a document the size of the node is handled). The rule both hold files and
socket paths to is not process setup: it is bridge.file_trust. Standard library only, so
`nri-policy-server` may import it as it imports the contract. Must not: import anything here
(stop_signals is loaded before the programs' own imports), or know NRI or webhooks.
"""
