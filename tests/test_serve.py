"""scripts/serve.sh's parts that need no running app: nginx's configuration as filled in (and as
nginx itself reads it), the refusals with their messages, the server's name for the pages.
The replicas themselves, behind nginx, with one killed: tests/browser/test_replicas.py."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from explorer.serve import nginx
from explorer.serve.nginx import Upstream
from explorer.serve.replicas import (
    SECRET_ENV,
    TRUSTED_PROXY_ENV,
    ServeError,
    Supervisor,
    answers,
    free_port,
    private_folder,
    required_secret,
)
from explorer.ui import health

ROOT = Path(__file__).resolve().parents[1]
UPSTREAMS = [Upstream("r1", 40001), Upstream("r2", 40002), Upstream("r3", 40003)]


def test_the_configuration_routes_each_cookie_to_its_replica_with_the_others_as_backups(tmp_path):
    text = nginx.render(UPSTREAMS, "127.0.0.1:8080", tmp_path)
    assert not re.search(r"\{\{ *\w+ *\}\}", text)
    assert re.search(r"map \$cookie_de_replica \$replica_pool \{\s*default everyone;\s*r1 replica_r1;\s*r2 replica_r2;"
                     r"\s*r3 replica_r3;", text)  # fmt: skip
    pool = re.search(r"upstream replica_r2 \{(.*?)\}", text, re.S).group(1)
    servers = re.findall(r"server (\S+?)( backup)?;|server (\S+) max_fails", pool)
    assert [s[0] or s[2] for s in servers] == ["127.0.0.1:40002", "127.0.0.1:40001", "127.0.0.1:40003"]
    assert [bool(s[1]) for s in servers] == [False, True, True]  # its own first, the others only if it is down
    everyone = re.search(r"upstream everyone \{(.*?)\}", text, re.S).group(1)
    assert "least_conn" in everyone and "backup" not in everyone and everyone.count("server ") == 3
    # The cookie names the replica that answered (the last address nginx tried).
    assert '"~(^|\\s)127\\.0\\.0\\.1:40003$" r3;' in text
    assert 'Set-Cookie "de_replica=$served_by; Path=/; HttpOnly; SameSite=Lax" always' in text
    assert "listen 127.0.0.1:8080;" in text and f'pid "{tmp_path}/nginx.pid";' in text


@pytest.mark.skipif(nginx.find_nginx() is None, reason="nginx is not installed (Debian: apt-get install nginx)")
def test_nginx_lets_an_idle_connection_go_before_a_replica_closes_it(tmp_path):
    """A connection nginx reused just as the replica's uvicorn closed it for idling was a
    "connection reset by peer", counted as the replica failing: the request and the page's routing
    cookie went to the other replica (seen in tests/browser/test_replicas.py under load). Every
    upstream keeps idle connections for less time than uvicorn does, as Gradio starts it."""
    import re

    import uvicorn

    text = nginx.render(UPSTREAMS, "127.0.0.1:8080", tmp_path)
    blocks = re.findall(r"upstream (\w+) \{(.*?)\}", text, flags=re.S)
    assert len(blocks) == len(UPSTREAMS) + 1  # everyone, and one per replica
    replica_idle_s = uvicorn.Config(app=None).timeout_keep_alive
    for name, body in blocks:
        kept = re.search(r"keepalive_timeout (\d+)s;", body)
        assert kept and int(kept.group(1)) < replica_idle_s, name


def test_nginx_itself_accepts_the_configuration(tmp_path):
    (tmp_path / "nginx.conf").write_text(nginx.render(UPSTREAMS, "127.0.0.1:8080", tmp_path))
    nginx.check(nginx.find_nginx(), tmp_path)  # nginx -t: raises with nginx's words if not
    (tmp_path / "nginx.conf").write_text("http { nonsense; }")
    with pytest.raises(ValueError, match="nginx refused"):
        nginx.check(nginx.find_nginx(), tmp_path)


def test_a_template_with_a_part_left_unfilled_is_refused(tmp_path):
    template = tmp_path / "t.conf"
    template.write_text("listen {{ listen }}; {{ nowhere }}")
    with pytest.raises(ValueError, match="nowhere"):
        nginx.render(UPSTREAMS, "127.0.0.1:1", tmp_path, template)


@pytest.mark.parametrize("value", [None, "", "short"])
def test_replicas_refuse_to_start_without_a_shared_browser_secret(value, tmp_path):
    environ = {} if value is None else {SECRET_ENV: value}
    with pytest.raises(ServeError, match=f"(?s){SECRET_ENV} is not set.*export {SECRET_ENV}="):
        required_secret(environ)


def test_the_command_says_what_to_do_and_starts_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != SECRET_ENV}
    done = subprocess.run(
        [sys.executable, "-m", "explorer.serve", "--replicas", "2", "--run-dir", str(tmp_path / "run")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert done.stderr.startswith("Cannot start the replicas: ")
    assert SECRET_ENV in done.stderr or "nginx is not installed" in done.stderr
    assert not (tmp_path / "run").exists()  # nothing started, nothing written


@pytest.mark.parametrize("count", [0, 9])
def test_a_number_of_replicas_out_of_range_is_refused(count, tmp_path, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, "x" * 32)
    with pytest.raises(ServeError, match="--replicas must be between 1 and 8"):
        Supervisor(count, 8080, "127.0.0.1", tmp_path)


def test_the_servers_name_is_new_at_every_start_and_takes_only_a_safe_replica_name(monkeypatch):
    monkeypatch.setenv(health.REPLICA_ENV, "r2")
    first, second = health.server_name(), health.server_name()
    assert first.startswith("r2-") and first != second
    assert str(os.getpid()) not in first  # the process id is nobody's business outside (issue 40, item 15)
    monkeypatch.setenv(health.REPLICA_ENV, "<script>")
    assert health.server_name().startswith("app-")


def test_nginx_logs_no_query_string_and_connects_from_the_trusted_address(tmp_path):
    """Issue 40, items 10 and 15: a link's parameters stay out of nginx's log; the replicas believe
    X-Forwarded-For from nginx's own address only."""
    text = nginx.render(UPSTREAMS, "127.0.0.1:8080", tmp_path)
    log_format = re.search(r"log_format replicas (.*?);", text, re.S).group(1)
    assert "$request " not in log_format and '"$request"' not in log_format and "$args" not in log_format
    assert "$uri" in log_format and "$http_referer" not in log_format
    assert f"proxy_bind {nginx.BALANCER_ADDRESS};" in text


def test_the_run_folder_is_private_even_when_it_existed(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir(mode=0o755)
    private_folder(folder)
    assert folder.stat().st_mode & 0o777 == 0o700
    private_folder(tmp_path / "new" / "run")
    assert (tmp_path / "new" / "run").stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize(
    ("environ", "believed"),
    [
        ({}, ""),  # nobody, not even a loopback client (uvicorn's own default is 127.0.0.1)
        ({TRUSTED_PROXY_ENV: "127.0.0.2"}, "127.0.0.2"),
        ({TRUSTED_PROXY_ENV: " 10.0.0.5,10.0.0.6 ", "FORWARDED_ALLOW_IPS": "*"}, "10.0.0.5,10.0.0.6"),
        ({"FORWARDED_ALLOW_IPS": "10.0.0.9"}, "10.0.0.9"),  # an operator's own uvicorn setting
    ],
)  # fmt: skip
def test_x_forwarded_for_is_believed_from_the_configured_balancer_only(environ, believed):
    from explorer.ui.app import believe_forwarded_for

    environ = dict(environ)
    assert believe_forwarded_for(environ) == believed
    assert environ["FORWARDED_ALLOW_IPS"] == believed


def test_each_replica_is_told_to_believe_its_nginx_only(tmp_path, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, "x" * 32)
    monkeypatch.setattr(nginx, "find_nginx", lambda: "/bin/true")
    supervisor = Supervisor(1, 8080, "127.0.0.1", tmp_path)
    started = {}
    monkeypatch.setattr(supervisor, "spawn", lambda argv, log, env: started.update(env) or subprocess.Popen(["true"]))
    supervisor.start_replica(supervisor.replicas[0])
    assert started[TRUSTED_PROXY_ENV] == nginx.BALANCER_ADDRESS


# ---------------------------------------------------------------- arguments (issue 40, item 14)
REFUSED = [
    ({"host": "127.0.0.1:7957; #"}, "--host must be an IP address"),
    ({"host": "127.0.0.1 "}, "--host must be an IP address"),
    ({"host": "a;b"}, "--host must be an IP address"),
    ({"host": ""}, "--host must be an IP address"),
    ({"port": 0}, "--port must be a port number between 1 and 65535"),
    ({"port": 70000}, "--port must be a port number between 1 and 65535"),
    ({"threads": -3}, "--threads must be a whole number between 1 and"),
    ({"threads": 0}, "--threads must be a whole number between 1 and"),
    ({"restart_delay_s": math.nan}, "--restart-delay must be a number of seconds above 0"),
    ({"restart_delay_s": math.inf}, "--restart-delay must be a number of seconds above 0"),
    ({"restart_delay_s": -1.0}, "--restart-delay must be a number of seconds above 0"),
    ({"restart_delay_s": 0.0}, "--restart-delay must be a number of seconds above 0"),
    ({"count": 100}, "--replicas must be between 1 and 8"),
    ({"run_dir": "/tmp/a$b"}, "has a character nginx cannot take"),
    ({"run_dir": '/tmp/a"b'}, "has a character nginx cannot take"),
]


@pytest.mark.parametrize(("given", "said"), REFUSED)
def test_every_argument_is_checked_for_type_and_range(given, said, tmp_path, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, "x" * 32)
    chosen = {"count": 1, "port": 8080, "host": "127.0.0.1", "run_dir": tmp_path / "run", **given}
    chosen["run_dir"] = Path(chosen["run_dir"])
    with pytest.raises(ServeError, match=re.escape(said)):
        Supervisor(**chosen)
    assert not chosen["run_dir"].exists()


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0", "::1", "localhost", "class-1.example.org"])
def test_addresses_and_hostnames_are_taken(host, tmp_path, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, "x" * 32)
    if nginx.find_nginx() is None:
        pytest.skip("nginx is not installed (Debian: apt-get install nginx)")
    supervisor = Supervisor(1, 8080, host, tmp_path)
    assert supervisor.url in (f"http://{host}:8080", "http://[::1]:8080")


@pytest.mark.parametrize(
    "argv",
    [["--host", "127.0.0.1:7957; #"], ["--restart-delay", "nan"], ["--threads", "-3"], ["--port", "http"]],
)
def test_the_command_refuses_a_bad_argument_with_a_sentence(argv, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "explorer.serve", "--run-dir", str(tmp_path / "run"), *argv],
        cwd=ROOT, env={**os.environ, SECRET_ENV: "x" * 32}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert re.search(r"Cannot start the replicas: --\S+ must be|argument --port: invalid int value", done.stderr)
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(nginx.find_nginx() is None, reason="nginx is not installed (Debian: apt-get install nginx)")
def test_nginx_takes_a_run_folder_with_a_space(tmp_path):
    run_dir = tmp_path / "my run folder"
    run_dir.mkdir()
    (run_dir / "nginx.conf").write_text(nginx.render(UPSTREAMS, "127.0.0.1:8080", run_dir))
    nginx.check(nginx.find_nginx(), run_dir)


# ------------------------------------------------- processes (issue 40, item 14), with stand-in replicas
STAND_IN_REPLICA = """
import http.server, json, os

class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"status": "ok"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

address = (os.environ["GRADIO_SERVER_NAME"], int(os.environ["GRADIO_SERVER_PORT"]))
http.server.ThreadingHTTPServer(address, Health).serve_forever()
"""


@pytest.fixture
def supervised(tmp_path, monkeypatch):
    """The real supervisor and nginx, in an existing private run folder with a space in its name,
    in front of two replicas that only answer GET /health (no model to load)."""
    if nginx.find_nginx() is None:
        pytest.skip("nginx is not installed (Debian: apt-get install nginx)")
    monkeypatch.setenv(SECRET_ENV, "x" * 32)
    script = tmp_path / "stand_in_replica.py"
    script.write_text(STAND_IN_REPLICA)
    monkeypatch.setattr(Supervisor, "replica_command", staticmethod(lambda: [sys.executable, str(script)]))
    run_dir = tmp_path / "the run folder"
    run_dir.mkdir(mode=0o700)
    supervisor = Supervisor(2, free_port(), "127.0.0.1", run_dir, restart_delay_s=1.0)
    try:
        supervisor.start()
        yield supervisor
    finally:
        supervisor.stop()


def group_of(leader: int) -> list[int]:
    """The live processes in the process group ``leader`` leads (or led)."""
    members = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # not a process, or one that ended while read
        if fields[0] != "Z" and int(fields[2]) == leader:
            members.append(int(entry.name))
    return members


def alive(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def test_nginx_killed_is_started_again_and_its_worker_does_not_keep_the_port(supervised):
    master = supervised.nginx.pid
    workers = [pid for pid in group_of(master) if pid != master]
    assert workers, "nginx's worker runs in nginx's own process group"
    os.kill(master, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while supervised.nginx.pid == master or not answers(supervised.url):
        assert time.monotonic() < deadline, "nginx was not started again"
        supervised.check_once()  # (the supervisor's loop calls it every second)
        time.sleep(0.5)
    assert not [pid for pid in workers if alive(pid)], "the killed nginx's worker still runs"
    state = json.loads((supervised.run_dir / "replicas.json").read_text())
    assert state["nginx_pid"] == supervised.nginx.pid != master


def test_the_run_folder_stays_private_and_may_have_a_space(supervised):
    assert answers(supervised.url)
    assert stat.S_IMODE(supervised.run_dir.stat().st_mode) == 0o700
    assert '"' + str(supervised.run_dir) in (supervised.run_dir / "nginx.conf").read_text()


def test_stopping_stops_every_process_of_every_group(supervised):
    leaders = [supervised.nginx.pid, *(r.process.pid for r in supervised.replicas)]
    started = [pid for leader in leaders for pid in group_of(leader)]
    assert len(started) >= len(leaders) + 1  # nginx's master and worker, each replica
    supervised.stop()
    assert not [pid for pid in started if alive(pid)]
