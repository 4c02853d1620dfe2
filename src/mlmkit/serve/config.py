"""What a server allows: its options (`ServeConfig`, declared with the other options
dataclasses in `mlmkit.options.serving`) and who may reach it."""

from __future__ import annotations

import ipaddress

from mlmkit.errors import InvalidArgument
from mlmkit.options.serving import ServeConfig

__all__ = ["ServeConfig", "check_host", "is_loopback"]

LOOPBACK_NAMES = {"localhost", "ip6-localhost"}


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server on this machine."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_host(host: str, api_key: str | None) -> None:
    """A server reachable from other machines must ask for a key."""
    if not is_loopback(host) and api_key is None:
        raise InvalidArgument(
            f"--host {host} makes the server reachable from other machines, and it runs models "
            "for anyone who can reach it: pass --api-key KEY (or --api-key-file) too, or keep "
            "the default --host 127.0.0.1")
