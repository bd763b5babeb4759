"""NRI semantics: lifecycle, events and masks, the handler interface, the state cache."""
