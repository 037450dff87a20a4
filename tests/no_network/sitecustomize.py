"""No test reaches beyond this machine: every Python socket connection to an address that is not
loopback, and every name lookup of another machine, is refused and logged (hwnas promises to
download nothing and report nothing at run time; OpenVINO sent usage telemetry on import and on
every conversion until `hwnas.devices.openvino_backend.import_openvino`).

Loaded in the test process by tests/conftest.py and, as ``sitecustomize`` on PYTHONPATH, in every
Python process a test starts (forked children inherit it). Each attempt is appended to the file
named by HWNAS_TEST_NETWORK_LOG; the conftest fails the test during which one was logged. Native
code that opens its own sockets (libpq, gloo, Chromium) is not seen: those connect over loopback in
the tests.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import traceback

LOG_ENV = "HWNAS_TEST_NETWORK_LOG"


def _is_local_host(host) -> bool:
    if host is None or isinstance(host, bytes) and not host:
        return True
    host = (host.decode() if isinstance(host, bytes) else str(host)).split("%", 1)[0]
    if host in ("localhost", "", socket.gethostname()):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False  # another machine's name: resolving it reaches out
    return ip.is_loopback or ip.is_unspecified


def _is_local(address) -> bool:
    return not isinstance(address, tuple) or _is_local_host(address[0])  # not a tuple: AF_UNIX path


def _refused(sock: socket.socket, address) -> bool:
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or _is_local(address):
        return False
    _log("connect", address)
    return True


def _log(what: str, address) -> None:
    path = os.environ.get(LOG_ENV)
    if path:
        where = " < ".join(f"{os.path.basename(f.filename)}:{f.lineno}"
                           for f in reversed(traceback.extract_stack()[-8:-2]))
        with open(path, "a") as log:
            log.write(f"pid {os.getpid()} {what} {address!r} from {where}\n")


def install() -> None:
    """Refuse (and log) outbound connections from this process and the ones it forks."""
    if getattr(socket.socket.connect, "_hwnas_guard", False):
        return
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def connect(self, address):
        if _refused(self, address):
            raise ConnectionRefusedError(errno.ECONNREFUSED, f"tests: no network (tried {address!r})")
        return real_connect(self, address)

    def connect_ex(self, address):
        return errno.ECONNREFUSED if _refused(self, address) else real_connect_ex(self, address)

    def getaddrinfo(host, *args, **kwargs):
        if not _is_local_host(host):
            _log("lookup", host)
            raise socket.gaierror(socket.EAI_NONAME, f"tests: no network (looked up {host!r})")
        return real_getaddrinfo(host, *args, **kwargs)

    connect._hwnas_guard = True
    socket.socket.connect, socket.socket.connect_ex = connect, connect_ex
    socket.getaddrinfo = getaddrinfo


if os.environ.get(LOG_ENV):
    install()
