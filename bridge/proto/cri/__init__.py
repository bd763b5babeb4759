"""Generated CRI messages the bridge uses (see bridge/proto/generate.py)."""
