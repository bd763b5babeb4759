"""Python code generated from schemas/nri/*.proto. Never edit by hand: run `make proto`."""
