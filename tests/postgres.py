"""A PostgreSQL server of the test suite's own: Debian's ``postgresql`` package (installed by the
README's test command), started in a temporary folder on a port the OS chose, stopped after.

Where the package is not installed, ``why_not()`` says so and the tests that need it are skipped
with that reason printed.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

INSTALL = "apt-get install -y postgresql (the README's test command does)"


def binaries() -> Path | None:
    """The newest installed server's folder of programs (/usr/lib/postgresql/<version>/bin)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


def why_not() -> str | None:
    """None when a server can be started here; else the reason, to print with the skip."""
    if binaries() is None:
        return f"PostgreSQL is not installed: {INSTALL}"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "PostgreSQL refuses to run as root and there is no postgres user to run it as"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def as_server_user(command: list[str]) -> list[str]:
    """PostgreSQL will not run as root: as root, the command runs as the postgres user."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@contextlib.contextmanager
def running_postgres():
    """Yield the SQLAlchemy URL of a new, empty server; stop it and delete its folder after."""
    bin_dir = binaries()
    folder = Path(tempfile.mkdtemp(prefix="explorer-postgres-"))
    data = folder / "data"
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    try:
        run([str(bin_dir / "initdb"), "-D", str(data), "-U", "explorer", "--auth=trust", "-E", "UTF8"])
        port = free_port()
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c fsync=off"
        run([str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(folder / "server.log"), "-o", options, "-w", "start"])
        try:
            run([str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "explorer", "workshops"])
            yield f"postgresql+psycopg://explorer@127.0.0.1:{port}/workshops"
        finally:
            run([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run(command: list[str]) -> None:
    started = time.time()
    done = subprocess.run(as_server_user(command), capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} failed after {time.time() - started:.0f} s: {done.stderr or done.stdout}")
