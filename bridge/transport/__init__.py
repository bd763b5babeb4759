"""The only code that touches sockets: the mux trunk, the ttrpc server and client."""
