"""The runtime's CRI socket, as the bridge uses it: UpdateContainerResources and Version.

The bridge changes running containers through CRI on runtimes where NRI's UpdateContainers can
deadlock (docs/protocol.md#unsolicited-updates-and-the-runtimes-locks).
"""
