"""scripts/serve.sh's parts that need no running app: nginx's configuration as filled in (and as
nginx itself reads it), the refusals with their messages, the server's name for the pages.
The replicas themselves, behind nginx, with one killed: tests/browser/test_replicas.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.serve import nginx
from explorer.serve.nginx import Upstream
from explorer.serve.replicas import (
    SECRET_ENV,
    TRUSTED_PROXY_ENV,
    ServeError,
    Supervisor,
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
    assert "listen 127.0.0.1:8080;" in text and f"pid {tmp_path}/nginx.pid;" in text


@pytest.mark.skipif(nginx.find_nginx() is None, reason="nginx is not installed (Debian: apt-get install nginx)")
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
