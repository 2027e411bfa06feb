"""The supervisor's arguments, checked for type and range before anything starts.

Every value here ends up in nginx's configuration or in how often a process is started, so none is
taken as it comes: ``--host "127.0.0.1:7957; #"`` would otherwise be pasted into nginx.conf (and
pass ``nginx -t``), ``--restart-delay nan`` would never restart a replica, ``--threads -3`` would
be handed to PyTorch. Each check raises ValueError with a sentence that says what to give instead.
"""

from __future__ import annotations

import ipaddress
import math
import re
from pathlib import Path

MAX_REPLICAS = 8  # each replica holds its own models (~1.7 GB with the embedded ones)
MAX_THREADS = 1024
MAX_RESTART_DELAY_S = 3600.0
HOSTNAME_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
# Characters nginx would read as something else even inside a quoted string ($ starts a variable
# in access_log's path), or that no sane folder name needs (quotes, backslashes, control characters).
RUN_DIR_REFUSED = re.compile(r'[$"\'\\\x00-\x1f\x7f]')


def replica_count(value: object) -> int:
    if not is_int(value) or not 1 <= value <= MAX_REPLICAS:
        raise ValueError(f"--replicas must be between 1 and {MAX_REPLICAS} (each holds its own models)")
    return value


def port(value: object) -> int:
    if not is_int(value) or not 1 <= value <= 65535:
        raise ValueError(f"--port must be a port number between 1 and 65535, not {value!r}")
    return value


def host(value: object) -> str:
    """An IP address (v4 or v6) or a hostname, nothing else (no port, no spaces, no ``;``)."""
    if isinstance(value, str):
        try:
            return str(ipaddress.ip_address(value))
        except ValueError:
            labels = value.rstrip(".").split(".")
            if len(value) <= 253 and all(HOSTNAME_LABEL.match(label) for label in labels):
                return value
    raise ValueError(
        f"--host must be an IP address (127.0.0.1, 0.0.0.0, ::1) or a hostname (localhost), not {value!r}; "
        "give the port with --port"
    )


def threads(value: object) -> int | None:
    if value is None:
        return None  # the cores shared out
    if not is_int(value) or not 1 <= value <= MAX_THREADS:
        raise ValueError(f"--threads must be a whole number between 1 and {MAX_THREADS}, not {value!r}")
    return value


def restart_delay(value: object) -> float:
    number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    if not (math.isfinite(number) and 0 < number <= MAX_RESTART_DELAY_S):
        raise ValueError(f"--restart-delay must be a number of seconds above 0 and at most "
                         f"{MAX_RESTART_DELAY_S:.0f}, not {value!r}")  # fmt: skip
    return number


def run_dir(value: Path) -> Path:
    """A folder nginx can be told about: spaces are fine (the configuration quotes every path)."""
    if RUN_DIR_REFUSED.search(str(value)):
        raise ValueError(
            f"--run-dir {str(value)!r} has a character nginx cannot take in a path ($, a quote, a backslash "
            "or a control character): choose a folder without one"
        )
    if value.exists() and not value.is_dir():
        raise ValueError(f"--run-dir {str(value)!r} is a file, not a folder: choose a folder")
    return value


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def listen_address(checked_host: str, checked_port: int) -> str:
    """``host:port`` as nginx's ``listen`` and a URL write it (an IPv6 address in brackets)."""
    if ":" in checked_host:
        return f"[{checked_host}]:{checked_port}"
    return f"{checked_host}:{checked_port}"
