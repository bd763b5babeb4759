"""Sans-IO codecs for the NRI wire protocol: bytes in, frames out, and back.

Nothing in this package touches sockets, asyncio or clocks.
"""
