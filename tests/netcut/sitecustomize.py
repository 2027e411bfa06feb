"""Cut a Python process off the network: put this folder first on its PYTHONPATH.

Python imports ``sitecustomize`` at start-up, so every connection the process makes goes
through the check below. Loopback stays open (the app's own server and the browser that
drives it); anything else fails at once, as on a machine without a network.
"""

import socket

LOOPBACK = {"127.0.0.1", "::1", "localhost"}
_connect, _connect_ex, _getaddrinfo = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo


def _refuse(sock: socket.socket, address) -> None:
    if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in LOOPBACK:
        raise OSError(101, f"Network is unreachable (cut off for this test): {address[0]}")


def connect(self, address):
    _refuse(self, address)
    return _connect(self, address)


def connect_ex(self, address):
    _refuse(self, address)
    return _connect_ex(self, address)


def getaddrinfo(host, *args, **kwargs):
    if host not in LOOPBACK and host is not None and not str(host).replace(".", "").isdigit():
        raise socket.gaierror(socket.EAI_NONAME, f"no name resolution (cut off for this test): {host}")
    return _getaddrinfo(host, *args, **kwargs)


socket.socket.connect = connect
socket.socket.connect_ex = connect_ex
socket.getaddrinfo = getaddrinfo
