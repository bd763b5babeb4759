"""Generated NRI and ttrpc messages (see bridge/proto/generate.py)."""
