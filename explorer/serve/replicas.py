"""Several app processes (replicas) behind nginx on one machine: start them, watch them, stop them.

``scripts/serve.sh --replicas 2`` runs ``python -m explorer.serve --replicas 2``:

1. each replica is ``python app.py`` on a local port of its own, told its name (r1, r2, ...) and
   how many threads PyTorch may use (the cores shared out, so that two replicas do not fight
   over the same two cores);
2. once every replica answers ``GET /health``, nginx starts in front of them on the one public
   port, with the configuration filled in from ``deploy/nginx.conf.template`` (sticky routing on
   a cookie; why, in the template);
3. then every second: a replica whose process ended is started again; one that has stopped
   answering ``GET /health`` for ``UNRESPONSIVE_S`` is killed first. nginx meanwhile sends its
   browsers to the others. nginx itself, if it ended, is started again at once (its leftover
   worker, which holds the port, stopped first);
4. on Ctrl+C or SIGTERM everything it started is stopped: nginx, then the replicas.

Each process it starts leads a process group of its own, and is stopped as a group: nginx's
worker, which outlives a master killed with SIGKILL and keeps listening on the port, goes with it.

What the replicas share: the key the browser-kept session is encrypted with (required: a page
moved to another replica brings its session back only if that replica can read it), the workshop
database (the SQLite file under the cache folder; a PostgreSQL URL across machines), the cache
folder of converted checkpoints. What each holds alone: its models and its visitors' sessions.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from explorer.serve import arguments, nginx
from explorer.serve.nginx import Upstream

ROOT = Path(__file__).resolve().parents[2]
SECRET_ENV = "DECODER_EXPLORER_BROWSER_SECRET"
REPLICA_ENV = "DECODER_EXPLORER_REPLICA"  # explorer/ui/health.py reads it
TRUSTED_PROXY_ENV = "DECODER_EXPLORER_TRUSTED_PROXY"  # explorer/ui/app.py reads it
START_TIMEOUT_S = 300  # a replica loads its models before it answers
UNRESPONSIVE_S = 30
# A replica that ended is started again this long after: its pages are moving to the others
# (each reloads and replays its session) and a replica starting up takes a core for ~10 s.
RESTART_DELAY_S = 10.0
# nginx that ends this soon after its start, this many times in a row, is not started again (its
# port taken by another program, its configuration refused): the supervisor stops and says so.
NGINX_QUICK_EXIT_S = 10.0
NGINX_QUICK_EXITS = 3


class ServeError(Exception):
    """Something the operator must fix before the replicas can start; the message says what."""


@dataclass
class Replica:
    upstream: Upstream
    process: subprocess.Popen | None = None
    starts: int = 0
    last_healthy: float = 0.0
    ended_at: float | None = None  # when the supervisor saw its process gone

    @property
    def name(self) -> str:
        return self.upstream.name

    @property
    def url(self) -> str:
        return f"http://{self.upstream.address}"


def required_secret(environ=os.environ) -> str:
    secret = environ.get(SECRET_ENV, "")
    if len(secret) < 16:
        raise ServeError(
            f"{SECRET_ENV} is not set (or shorter than 16 characters). Every replica must encrypt and read "
            "the session a browser keeps with the same key, else a page moved to another replica loses it. "
            f'Set it once for all of them, for example:\n  export {SECRET_ENV}="$(python3 -c '
            "'import secrets; print(secrets.token_urlsafe(32))')\""
        )
    return secret


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def answers(url: str, timeout: float = 2.0) -> bool:
    """Whether ``url``/health says ok."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout) as reply:
            return json.loads(reply.read()).get("status") == "ok"
    except (OSError, ValueError):
        return False


def private_folder(folder: Path) -> None:
    """The run folder, made if need be, private: nginx's logs, its configuration and the replicas'
    logs are the operator's alone. (Run the supervisor as an ordinary user: started as root,
    nginx's workers would run as nobody and could not reach their temporary folders in here.)"""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)


def die_with_parent() -> None:
    """In a child, before it runs: the kernel sends it SIGTERM if the supervisor dies (even by
    SIGKILL), so that no replica or nginx outlives it. Linux only; elsewhere nothing."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Supervisor:
    def __init__(
        self, count: int, port: int, host: str, run_dir: Path, threads: int | None = None,
        restart_delay_s: float = RESTART_DELAY_S,
    ):  # fmt: skip
        try:
            count, port, host = arguments.replica_count(count), arguments.port(port), arguments.host(host)
            threads, run_dir = arguments.threads(threads), arguments.run_dir(run_dir)
            restart_delay_s = arguments.restart_delay(restart_delay_s)
        except ValueError as refused:
            raise ServeError(str(refused)) from None
        self.program = nginx.find_nginx()
        if not self.program:
            raise ServeError("nginx is not installed. On Debian or Ubuntu: sudo apt-get install nginx")
        if not nginx.TEMPLATE.is_file():
            raise ServeError(f"{nginx.TEMPLATE} is missing: run the replicas from a clone of the repository")
        required_secret()
        self.run_dir, self.host, self.port = run_dir, host, port
        self.threads = threads or max(1, (os.cpu_count() or 1) // count)
        self.restart_delay_s = restart_delay_s
        self.replicas = [Replica(Upstream(f"r{i + 1}", free_port())) for i in range(count)]
        self.nginx: subprocess.Popen | None = None
        self.nginx_started_at = 0.0
        self.nginx_quick_exits = 0

    @property
    def listen(self) -> str:
        return arguments.listen_address(self.host, self.port)

    @property
    def url(self) -> str:
        return f"http://{self.listen}"

    # ------------------------------------------------------------------ start
    def start(self) -> None:
        private_folder(self.run_dir)
        for replica in self.replicas:
            self.start_replica(replica)
        for replica in self.replicas:
            self.wait_healthy(replica)
        conf = self.run_dir / "nginx.conf"
        conf.write_text(nginx.render([r.upstream for r in self.replicas], self.listen, self.run_dir))
        nginx.check(self.program, self.run_dir)
        self.start_nginx()
        self.wait_until(lambda: answers(self.url), 30, "nginx did not answer; see " + str(self.run_dir))
        self.write_state()

    def start_nginx(self) -> None:
        self.nginx = self.spawn(nginx.command(self.program, self.run_dir), self.run_dir / "nginx.out", os.environ)
        self.nginx_started_at = time.monotonic()

    def start_replica(self, replica: Replica) -> None:
        env = {
            **os.environ,
            "GRADIO_SERVER_NAME": replica.upstream.host,
            "GRADIO_SERVER_PORT": str(replica.upstream.port),
            REPLICA_ENV: replica.name,
            TRUSTED_PROXY_ENV: nginx.BALANCER_ADDRESS,  # X-Forwarded-For believed from nginx only
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(self.threads)),
            "PYTHONUNBUFFERED": "1",
        }
        log = self.run_dir / f"replica-{replica.name}.log"
        replica.process = self.spawn(self.replica_command(), log, env)
        replica.starts += 1
        replica.last_healthy = time.monotonic()  # (its load time does not count as unresponsive)
        self.say(
            f"replica {replica.name}: started on port {replica.upstream.port} (pid {replica.process.pid}, log {log})"
        )

    @staticmethod
    def replica_command() -> list[str]:
        return [sys.executable, str(ROOT / "app.py")]

    def spawn(self, argv: list[str], log_path: Path, env) -> subprocess.Popen:
        """``argv`` in a session (so a process group) of its own, which stop_group stops whole."""
        with open(log_path, "ab") as log:
            return subprocess.Popen(
                argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent,
                start_new_session=True,
            )  # fmt: skip

    def wait_healthy(self, replica: Replica) -> None:
        def healthy() -> bool:
            if replica.process.poll() is not None:
                raise ServeError(
                    f"replica {replica.name} exited with {replica.process.returncode}; see its log in {self.run_dir}"
                )
            return answers(replica.url)

        self.wait_until(healthy, START_TIMEOUT_S, f"replica {replica.name} did not answer within {START_TIMEOUT_S} s")
        self.say(f"replica {replica.name}: serving")

    @staticmethod
    def wait_until(ready, timeout: float, failure: str) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                raise ServeError(failure)
            time.sleep(0.5)  # polling a process that is starting up

    # ------------------------------------------------------------------ watch
    def check_once(self) -> None:
        """Start again nginx or a replica whose process ended; kill a replica that stopped answering."""
        if self.nginx is not None and self.nginx.poll() is not None:
            self.restart_nginx(self.nginx.returncode)
        for replica in self.replicas:
            code = replica.process.poll()
            if code is not None:
                self.restart_later(replica, code)
            elif answers(replica.url, timeout=1.0):
                replica.last_healthy = time.monotonic()
            elif time.monotonic() - replica.last_healthy > UNRESPONSIVE_S:
                self.say(f"replica {replica.name}: no answer for {UNRESPONSIVE_S} s; killing it")
                kill_group(replica.process)

    def restart_later(self, replica: Replica, code: int) -> None:
        """Start an ended replica again, ``restart_delay_s`` after its end was seen."""
        now = time.monotonic()
        if replica.ended_at is None:
            replica.ended_at = now
            self.say(f"replica {replica.name}: ended with {code}; nginx sends its browsers to the others; "
                     f"starting it again in {self.restart_delay_s:.0f} s")  # fmt: skip
        if now - replica.ended_at >= self.restart_delay_s:
            replica.ended_at = None
            self.start_replica(replica)
            self.write_state()

    def restart_nginx(self, code: int) -> None:
        """nginx ended (killed, crashed): its worker may still hold the port, so its whole group is
        stopped, then it is started again at once (every browser goes through it). One that keeps
        ending as soon as it starts is given up, with a ServeError that says where to look."""
        kill_group(self.nginx)
        quick = time.monotonic() - self.nginx_started_at < NGINX_QUICK_EXIT_S
        self.nginx_quick_exits = self.nginx_quick_exits + 1 if quick else 0
        if self.nginx_quick_exits >= NGINX_QUICK_EXITS:
            raise ServeError(f"nginx exited with {code} {NGINX_QUICK_EXITS} times within {NGINX_QUICK_EXIT_S:.0f} s "
                             f"of its start; see {self.run_dir}/nginx-error.log")  # fmt: skip
        self.say(f"nginx: ended with {code}; stopped what was left of it, starting it again")
        self.start_nginx()
        self.write_state()

    def write_state(self) -> None:
        """``replicas.json`` in the run folder: where everything is (for an operator, and the tests)."""
        state = {
            "url": self.url, "nginx_pid": self.nginx.pid if self.nginx else None,
            "replicas": [
                {"name": r.name, "port": r.upstream.port, "pid": r.process.pid, "starts": r.starts}
                for r in self.replicas
            ],
        }  # fmt: skip
        written = self.run_dir / "replicas.json.new"
        written.write_text(json.dumps(state, indent=1))
        written.replace(self.run_dir / "replicas.json")  # whole, never half written for a reader

    # ------------------------------------------------------------------ stop
    def stop(self) -> None:
        """nginx first (no new requests reach a replica that is stopping), then the replicas."""
        if self.nginx is not None:
            stop_group(self.nginx)
        for replica in self.replicas:
            if replica.process is not None:
                signal_group(replica.process, signal.SIGTERM)
        for replica in self.replicas:
            if replica.process is not None:
                stop_group(replica.process)
        self.say("stopped nginx and every replica")

    @staticmethod
    def say(line: str) -> None:
        print(line, flush=True)


def signal_group(process: subprocess.Popen, sig: int) -> None:
    """``sig`` to every process in ``process``'s group (its own: see Supervisor.spawn), also after
    the leader itself has ended, as long as one of them is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


def stop_group(process: subprocess.Popen, grace_s: float = 20) -> None:
    """SIGTERM to the group, then SIGKILL to whatever of it is left after ``grace_s``."""
    signal_group(process, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace_s)
    kill_group(process)


def kill_group(process: subprocess.Popen) -> None:
    signal_group(process, signal.SIGKILL)
    process.wait()
