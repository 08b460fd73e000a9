"""Can the Hugging Face hub be reached? One quick probe a process, so that a machine
without a network fails in a second with a hint, not after a minute of retries."""
from __future__ import annotations

import functools
import os
import socket
from urllib.parse import urlparse

PROXIES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def offline() -> bool:
    """True where the user said so (HF_HUB_OFFLINE=1 or TRANSFORMERS_OFFLINE=1): use the
    hub's local cache only."""
    return any(os.environ.get(v, "").upper() in ("1", "TRUE", "YES", "ON") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


@functools.cache
def reachable(timeout: float = 3.0) -> bool:
    """Whether a connection to the hub's host opens within `timeout` seconds. Behind a proxy
    (HTTPS_PROXY, ALL_PROXY) the host is not probed: the proxy decides."""
    if any(os.environ.get(v) for v in PROXIES):
        return True
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        socket.create_connection((endpoint.hostname, endpoint.port or 443), timeout).close()
        return True
    except OSError:
        return False
