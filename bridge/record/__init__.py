"""Record served events and replies as JSONL fixtures; replay them against a policy."""
