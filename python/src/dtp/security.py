"""TLS (with the ``ssl`` module) and tokens for the worker and the client.

``client_tls`` builds the context a dialler uses: TLS 1.2 or later, the
coordinator's certificate verified against the system CAs or a given CA, and
optionally a client certificate. ``is_tls_refusal`` tells a configuration
problem (an untrusted certificate, a peer that does not speak TLS) from a
transient one, so that a worker stops instead of dialling forever.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
from collections.abc import Mapping


class SecurityConfigError(ValueError):
    """A TLS file or token file that cannot be used (a usage error where it came from a flag)."""


def client_tls(
    ca_file: str | None = None,
    cert_file: str | None = None,
    key_file: str | None = None,
) -> ssl.SSLContext:
    """A client context; raises ``SecurityConfigError`` for unreadable or unusable files."""
    if (cert_file is None) != (key_file is None):
        raise SecurityConfigError("a client certificate needs both a certificate and its key")
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca_file)
    except (OSError, ssl.SSLError) as err:
        raise SecurityConfigError(
            f"cannot use TLS CA {ca_file}: {describe_os_error(err)}"
        ) from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_file is not None and key_file is not None:
        try:
            context.load_cert_chain(cert_file, key_file)
        except (OSError, ssl.SSLError) as err:
            raise SecurityConfigError(
                f"cannot use TLS certificate {cert_file} with key {key_file}: "
                f"{describe_os_error(err)}"
            ) from None
    return context


def server_hostname(host: str) -> str:
    """The name to verify the coordinator's certificate against: the host (IPs included)."""
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return host


def is_tls_refusal(err: BaseException) -> bool:
    """True for a handshake failure that no retry fixes (certificate, peer without TLS)."""
    if isinstance(err, ssl.SSLCertVerificationError):
        return True
    if isinstance(err, (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError)):
        return False  # the connection went away: a network matter
    return isinstance(err, ssl.SSLError)


def describe_tls_error(err: BaseException) -> str:
    reason = getattr(err, "reason", None)
    if reason in ("WRONG_VERSION_NUMBER", "PACKET_LENGTH_TOO_LONG", "RECORD_LAYER_FAILURE"):
        return (
            f"TLS handshake failed ({reason}): the server does not seem to speak TLS on this port"
        )
    verify = getattr(err, "verify_message", None)
    if verify:
        return f"TLS handshake failed: certificate verify failed: {verify}"
    return f"TLS handshake failed: {describe_os_error(err)}"


def describe_os_error(err: BaseException) -> str:
    if isinstance(err, OSError) and err.strerror:
        return err.strerror if not err.filename else f"{err.strerror}: {err.filename}"
    text = str(err)
    return text or type(err).__name__


def parse_tokens(text: str) -> list[str]:
    """The tokens of a token file: one per line, blank lines and ``#`` comments skipped."""
    out = []
    for line in text.splitlines():
        token = line.strip()
        if token and not token.startswith("#"):
            out.append(token)
    return out


def read_token_file(path: str) -> str:
    """The first token of a file; raises ``SecurityConfigError``."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as err:
        raise SecurityConfigError(f"cannot read {path}: {describe_os_error(err)}") from None
    tokens = parse_tokens(text)
    if not tokens:
        raise SecurityConfigError(f"{path} holds no token")
    return tokens[0]


def token_from_env(env: Mapping[str, str] = os.environ) -> str | None:
    """``DTP_TOKEN`` (the token itself), or None when unset or blank."""
    token = env.get("DTP_TOKEN", "").strip()
    return token or None
