"""nginx in front of the replicas: its configuration, filled in from ``deploy/nginx.conf.template``,
and the command that runs it in a folder of its own (no system-wide nginx is touched)."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from explorer.analysis.snapshot import MAX_FILE_BYTES
from explorer.serve import arguments

TEMPLATE = Path(__file__).resolve().parents[2] / "deploy" / "nginx.conf.template"
FAIL_TIMEOUT_S = 5  # a replica that refused a connection is left out this long, then tried again
# An idle connection to a replica is let go after this long: under uvicorn's keep-alive (5 s), so
# nginx never reuses one the replica is closing. Reusing it was a "connection reset by peer" that
# counted as the replica failing (max_fails=1): the request, and the page's routing cookie, went
# to the other replica.
KEEPALIVE_S = 4
SEARCHED = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")
# The address nginx connects to the replicas from (a loopback address of its own: on Linux every
# 127.x.y.z is this machine's); the replicas believe X-Forwarded-For from it only.
BALANCER_ADDRESS = "127.0.0.2"


@dataclass(frozen=True)
class Upstream:
    """One replica as nginx sees it: the name its cookie carries, where it listens."""

    name: str  # r1, r2, ...
    port: int
    host: str = "127.0.0.1"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def render(
    upstreams: list[Upstream], listen: str, run_dir: Path, template: Path = TEMPLATE, balancer: str = BALANCER_ADDRESS
) -> str:
    """The configuration for nginx listening on ``listen`` ("127.0.0.1:8080") in front of
    ``upstreams``, connecting to them from ``balancer``."""
    parts = {
        "balancer": balancer,
        "listen": listen,
        "max_upload": f"{MAX_FILE_BYTES // (1024 * 1024) + 1}m",
        "pool_by_cookie": lines(f"{u.name} replica_{u.name};" for u in upstreams),
        "name_by_address": lines(f'"~(^|\\s){re.escape(u.address)}$" {u.name};' for u in upstreams),
        "servers": lines(server_line(u) for u in upstreams),
        "keepalive_s": str(KEEPALIVE_S),
        "upstreams_by_replica": "\n".join(by_replica(u, upstreams) for u in upstreams),
    }
    text = quote_run_dir_paths(template.read_text(), run_dir)
    for key, value in parts.items():
        text = text.replace("{{ " + key + " }}", value)
    left = re.findall(r"\{\{ *\w+ *\}\}", text)
    if left:
        raise ValueError(f"{template}: nothing to fill in {', '.join(left)}")
    return text


def quote_run_dir_paths(text: str, run_dir: Path) -> str:
    """Each ``{{ run_dir }}/file`` as one quoted nginx string, so that a folder with a space in its
    name is one path to nginx (explorer/serve/arguments.py refuses the characters a quoted string
    cannot hold: $, quotes, backslashes)."""
    arguments.run_dir(run_dir)  # (raises ValueError for a folder nginx cannot be told about)
    return re.sub(r"\{\{ *run_dir *\}\}([^\s;]*)", lambda m: f'"{run_dir}{m.group(1)}"', text)


def lines(items, indent: int = 8) -> str:
    return "\n".join(" " * indent + item for item in items)


def server_line(upstream: Upstream, backup: bool = False) -> str:
    if backup:
        return f"server {upstream.address} backup;"
    return f"server {upstream.address} max_fails=1 fail_timeout={FAIL_TIMEOUT_S}s;"


def by_replica(upstream: Upstream, everyone: list[Upstream]) -> str:
    """The pool a browser with this replica's cookie goes to: the replica, then the others as backups."""
    servers = [server_line(upstream)] + [server_line(u, backup=True) for u in everyone if u != upstream]
    keep = f"        keepalive 8;\n        keepalive_timeout {KEEPALIVE_S}s;"
    return f"    upstream replica_{upstream.name} {{\n{lines(servers)}\n{keep}\n    }}"


def find_nginx() -> str | None:
    """The nginx program: on the PATH, or where Debian puts it (/usr/sbin is not on every user's PATH)."""
    found = shutil.which("nginx")
    return found or next((path for path in SEARCHED if Path(path).is_file()), None)


def command(program: str, run_dir: Path) -> list[str]:
    """nginx in the foreground (the supervisor is its parent), with everything under ``run_dir``."""
    conf = run_dir / "nginx.conf"
    return [program, "-p", str(run_dir), "-c", str(conf), "-e", str(run_dir / "nginx-error.log"), "-g", "daemon off;"]


def check(program: str, run_dir: Path) -> None:
    """``nginx -t``: the configuration is valid, or ValueError with nginx's own words."""
    done = subprocess.run([*command(program, run_dir)[:-2], "-t"], capture_output=True, text=True)
    if done.returncode != 0:
        raise ValueError(f"nginx refused {run_dir / 'nginx.conf'}:\n{done.stderr.strip()}")
