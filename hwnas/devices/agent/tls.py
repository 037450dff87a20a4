"""TLS between the agent and its clients, pinned by fingerprint (standard library `ssl`).

`hwnas agent serve --tls` speaks TLS with a self-signed certificate kept beside the token file
(`<token file>.crt`, its key `<token file>.key` with mode 0600) and prints the certificate's
SHA-256 fingerprint. A client whose device names that fingerprint (`tls_fingerprint`) speaks TLS
and trusts exactly that certificate: no certificate authority, no host names, so an agent on a
bare IP address works and nothing but the pinned certificate is accepted.

The certificate is made once, with the `openssl` command, and reused on every start so the
pinned fingerprint stays valid (delete both files to make a new one). Python's standard library
can use certificates but not create them; `openssl` is on every Linux and macOS system, whereas
the `cryptography` package would be a new dependency of every hwnas install for one command.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import ssl
import subprocess
import tempfile
from pathlib import Path

from hwnas.errors import AgentError

__all__ = ["certificate_paths", "ensure_certificate", "fingerprint", "normalize_fingerprint",
           "server_context", "client_context", "check_pin"]

_HEX64 = re.compile(r"[0-9A-Fa-f]{64}")


def fingerprint(der: bytes) -> str:
    """'sha256:AB:CD:...' of a DER certificate (the form `openssl x509 -fingerprint` prints)."""
    return _pretty(hashlib.sha256(der).hexdigest())


def _pretty(hex64: str) -> str:
    hex64 = hex64.upper()
    return "sha256:" + ":".join(hex64[i:i + 2] for i in range(0, 64, 2))


def normalize_fingerprint(text: str) -> str:
    """A pinned fingerprint in the one form hwnas prints; ValueError saying the form otherwise.
    Case, the 'sha256:' prefix and the colons are optional when typing one."""
    digits = re.sub(r"(?i)^sha256:", "", text.strip()).replace(":", "")
    if not _HEX64.fullmatch(digits):
        raise ValueError("must be a SHA-256 fingerprint like 'sha256:AB:CD:...' (32 hex bytes), "
                         "as `hwnas agent serve --tls` prints it")
    return _pretty(digits)


def certificate_paths(token_file: str | os.PathLike[str]) -> tuple[Path, Path]:
    """(certificate, key) beside the token file: one agent, one token, one certificate."""
    token = Path(token_file).expanduser()
    return token.with_name(token.name + ".crt"), token.with_name(token.name + ".key")


def ensure_certificate(token_file: str | os.PathLike[str]) -> tuple[Path, Path, str]:
    """(certificate, key, fingerprint), making them first when either file is missing."""
    cert, key = certificate_paths(token_file)
    if not (cert.is_file() and key.is_file()):
        _make_certificate(cert, key)
    try:
        der = ssl.PEM_cert_to_DER_cert(cert.read_text(encoding="ascii"))
    except (OSError, ValueError, UnicodeDecodeError) as err:
        raise AgentError(f"TLS certificate {cert} cannot be read ({err}); delete it and {key} "
                         "to make a new one (clients must then pin the new fingerprint)") from None
    return cert, key, fingerprint(der)


def _make_certificate(cert: Path, key: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise AgentError(f"--tls needs the `openssl` command once, to make the agent's certificate "
                         f"{cert}; install openssl (e.g. `apt install openssl`) or put a PEM "
                         f"certificate there and its key in {key}")
    cert.parent.mkdir(parents=True, exist_ok=True)
    # made in a private folder (mode 0700) and moved in: the key is never readable by others,
    # and an interrupted run leaves no half-made pair that a restart would take as complete
    with tempfile.TemporaryDirectory(dir=cert.parent, prefix=".hwnas-tls-") as tmp:
        new_cert, new_key = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
        cmd = [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256",
               "-days", "3650", "-subj", "/CN=hwnas-agent",
               "-keyout", str(new_key), "-out", str(new_cert)]
        try:
            subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
        except subprocess.CalledProcessError as err:
            why = (err.stderr or "").strip().splitlines()
            raise AgentError(f"openssl could not make the TLS certificate {cert}: "
                             f"{why[-1] if why else f'exit {err.returncode}'}") from None
        except (OSError, subprocess.TimeoutExpired) as err:
            raise AgentError(f"openssl could not make the TLS certificate {cert}: {err}") from None
        new_key.chmod(0o600)
        os.replace(new_key, key)
        os.replace(new_cert, cert)


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as err:
        raise AgentError(f"TLS certificate {cert} or its key {key} is unusable ({err}); delete "
                         "both to make a new pair (clients must then pin the new fingerprint)") from None
    return ctx


def client_context() -> ssl.SSLContext:
    """TLS without a certificate authority or host name check: `check_pin` is the check."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def check_pin(sock: ssl.SSLSocket, pinned: str, where: str) -> None:
    """AgentError unless the certificate the agent presented has the pinned fingerprint; called
    before anything (the token first of all) is sent."""
    der = sock.getpeercert(binary_form=True)
    got = fingerprint(der) if der else "none"
    if got != pinned:
        raise AgentError(f"agent at {where} presented a TLS certificate with fingerprint {got}, "
                         f"not the pinned tls_fingerprint {pinned}; nothing was sent. If the agent "
                         "made a new certificate, pin the fingerprint `hwnas agent serve --tls` "
                         "printed there; otherwise something else answers at that address")
