"""NRI semantics: the session, the runtime setup, event dispatch and masks, the handler
interface, the state cache."""
