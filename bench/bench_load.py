"""A class on one machine: many users stepping the embedded models at once (issue 12).

1. The batch-size curve (in this process, no server): SmolLM2 sessions of ~200 tokens, one
   batched cached step for 1, 2, 4, 8, 16, 32 of them: ms per batched step, ms per session.
2. Through the app (network cut off, as in the tests), with simulated users that speak the
   page's queue protocol at a browser's cost (tests/browser/page_client.py; --client
   gradio_client for the API's own client, which spends as much CPU as the server):
   - one user alone, 15 steps without pause: the step round trip;
   - the class: 30 students (2/3 SmolLM2, 1/3 the translator), each thinking 1-3 s between 15
     clicks: p50 and p95 of the step round trip, errors, cross-talk;
   - 20 users clicking without pause: p95 against one user's;
   - 30 sessions of ~200 tokens held at once: the server's peak memory (VmHWM).
3. Gradio alone: an event that does nothing, by one user and by 20 without pause (the floor).
Prints tables; not a test (machines are shared and noisy: compare ratios within one run).

    python bench/bench_load.py [--skip-curve] [--skip-server]
    BENCH_APP_ENV="DECODER_EXPLORER_RETURN_MEMORY_S=0" python bench/bench_load.py   # the app under extra env
    python bench/bench_load.py --memory-only   # the memory run alone
    python bench/bench_load.py --skip-curve --skip-floor --replicas 2   # one process, then 2 replicas behind nginx
    python bench/bench_load.py --skip-curve --skip-floor --students 60  # a class of 60
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from tests.browser.conftest import ARTIFACTS, running_app, running_replicas  # noqa: E402
from tests.browser.load import ClassPlan, LoadReport, simulate_users  # noqa: E402

CLASS = ClassPlan(translator_every=3, think_s=(1.0, 3.0))
NO_PAUSE = ClassPlan(translator_every=3)
LONG = ClassPlan(translator_every=10**6, prompt_words=60)  # every user on SmolLM2, ~200 tokens after 15 steps
PLANS = {"class": CLASS, "no pause": NO_PAUSE, "long": LONG}
TARGETS = "targets: class p95 <= 1000 ms, p50 <= 600 ms, 0 errors, 0 cross-talk; 20 users p95 <= 5x one user's; " \
    "30 sessions of 200 tokens <= 2000 MB (issue 41's targets)"  # fmt: skip


def batch_curve(sizes=(1, 2, 4, 8, 16, 32), context_words: int = 150, repeats: int = 5) -> None:
    import explorer
    from explorer.batching import batched_step

    torch.set_num_threads(2)
    loaded = explorer.load_model("smollm2-135m-instruct", progress=False)
    print("\nBatched cached steps, SmolLM2-135M, sessions of ~200 tokens (in-process, no server)")
    print(f"{'sessions':>8} {'ms per batched step':>20} {'ms per session':>15} {'x one step':>11}")
    single = None
    for size in sizes:
        sessions = [
            explorer.GenerationSession(loaded, " ".join(f"w{(s * 13 + i) % 89}" for i in range(context_words)))
            for s in range(size)
        ]  # fmt: skip
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            batched_step(sessions) if size > 1 else sessions[0].step()
            times.append((time.perf_counter() - start) * 1000)
        ms = statistics.median(times)
        single = single or ms
        print(f"{size:>8} {ms:>20.0f} {ms / size:>15.1f} {ms / single:>11.1f}")


def peak_rss_mb(pid: int) -> float:
    """The process's high-water mark of resident memory (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def row(name: str, report: LoadReport) -> tuple[str, str, str, str, str, str]:
    return (
        name, f"{report.median:.0f}", f"{report.percentile(0.95):.0f}", str(len(report.errors)),
        str(len(report.crosstalk)), f"{len(report.latencies) / report.seconds:.1f}",
    )  # fmt: skip


def step_parts(log: Path, offset: int) -> tuple[list[float], list[float]]:
    """From the app's profile lines after ``offset``: each Step's model part (its wait for a batch
    and the batched pass) and its views part, in ms."""
    text = log.read_text()[offset:]
    found = re.findall(r"profile step-parts batch ([\d.]+) ms views ([\d.]+) ms", text)
    return [float(b) for b, _ in found], [float(v) for _, v in found]


def passes(log: Path, offset: int) -> list[tuple[int, float]]:
    """From the batcher's profile lines after ``offset``: each pass's sessions and ms."""
    found = re.findall(r"profile batch (\d+) sessions ([\d.]+) ms", log.read_text()[offset:])
    return [(int(n), float(ms)) for n, ms in found]


def batcher_line(name: str, ran: list[tuple[int, float]], seconds: float) -> str:
    """How the batcher served a run: its passes, their sizes, and how much of the run it was busy.
    (Users without a pause came back in two groups, a pass of 19 and a pass of 1 in turn, each
    user's round trip both: issue 41's measurements in docs/performance.md.)"""
    if not ran:
        return f"  {name:10} no passes logged"
    sizes = [n for n, _ in ran]
    busy = sum(ms for _, ms in ran) / 1000 / seconds
    alone = sum(n == 1 for n in sizes) / len(sizes)
    return f"  {name:10} {len(ran):6d} {median(sizes):10.0f} {alone:10.0%} {busy:8.0%}"


def profiled(log: Path, run, server_pid: int):
    """Run ``run()``; returns its report, the median model and views parts of its steps, the CPU
    seconds per step of the server and of the simulated users (they share this machine), and the
    batcher's passes."""
    offset = len(log.read_text()) if log.exists() else 0
    server_cpu, users_cpu = cpu_seconds(server_pid), cpu_seconds(os.getpid())
    report = run()
    model, views = step_parts(log, offset)
    n = max(1, len(report.latencies))
    cpu = ((cpu_seconds(server_pid) - server_cpu) / n * 1000, (cpu_seconds(os.getpid()) - users_cpu) / n * 1000)
    return report, (median(model), median(views), *cpu), passes(log, offset)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


APP_ENV = dict(kv.split("=", 1) for kv in os.environ.get("BENCH_APP_ENV", "").split() if "=" in kv)


def memory_run() -> None:
    """Only the memory of 30 sessions of ~200 tokens."""
    with running_app(ARTIFACTS / "bench-load-app.log", **APP_ENV) as (url, server):
        before = peak_rss_mb(server.pid)
        simulate_users(url, 30, 15, LONG)
        after = peak_rss_mb(server.pid)
    print(f"peak server RSS: {before:.0f} MB with the models, {after:.0f} MB with 30 SmolLM2 sessions of ~200 tokens")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/<pid>/stat), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_runs(client: str, students: int = 30) -> dict:
    plans = {name: dataclasses.replace(plan, client=client) for name, plan in PLANS.items()}
    log = ARTIFACTS / "bench-load-app.log"
    log.unlink(missing_ok=True)
    with running_app(log, DECODER_EXPLORER_PROFILE="1", **APP_ENV) as (url, server):
        pid = server.pid
        alone, alone_parts, alone_passes = profiled(log, lambda: simulate_users(url, 1, 15, plans["no pause"]), pid)
        klass, class_parts, class_passes = profiled(log, lambda: simulate_users(url, students, 15, plans["class"]), pid)
        rush, rush_parts, rush_passes = profiled(log, lambda: simulate_users(url, 20, 15, plans["no pause"]), pid)
        before_long = peak_rss_mb(server.pid)
        simulate_users(url, 30, 15, plans["long"])
        long_mb = peak_rss_mb(server.pid)
    print(f"\nThrough the app ({client} users; step round trip in ms)")
    print(f"{'run':44} {'p50':>6} {'p95':>6} {'errors':>7} {'x-talk':>7} {'steps/s':>8}")
    for line in (
        row("one user, no pause", alone),
        row(f"class: {students} students, think 1-3 s, 2/3 SmolLM2", klass),
        row("20 users, no pause, 2/3 SmolLM2", rush),
    ):
        print(f"{line[0]:44} {line[1]:>6} {line[2]:>6} {line[3]:>7} {line[4]:>7} {line[5]:>8}")
    print("a Step, ms: the model (its wait for a batch, and the pass) | the views (medians)", end="")
    print(" | CPU per step: server, users")
    for name, (model, views, server, users) in (
        ("one user", alone_parts), ("class", class_parts), ("20 users", rush_parts)
    ):  # fmt: skip
        print(f"  {name:10} {model:8.0f} | {views:6.0f} | {server:6.0f} {users:6.0f}")
    print(f"the batcher: {'passes':>17} {'rows, p50':>10} {'of 1 row':>10} {'busy':>8}")
    for name, report, ran in (
        ("one user", alone, alone_passes),
        ("class", klass, class_passes),
        ("20 users", rush, rush_passes),
    ):
        print(batcher_line(name, ran, report.seconds))
    ratio = rush.percentile(0.95) / alone.percentile(0.95)
    print(f"20 users' p95 / one user's p95: {ratio:.1f}")
    print(f"peak server RSS: {before_long:.0f} MB after the runs above, {long_mb:.0f} MB after 30 SmolLM2 sessions")
    print("  of ~200 tokens besides (a peak over the server's life: --memory-only measures the 30 alone)")
    for line in (klass.errors + klass.crosstalk + rush.errors + rush.crosstalk)[:10]:
        print("  ", line)
    print(TARGETS)
    return {"runs": (alone, klass, rush), "models_mb": before_long, "long_mb": long_mb}


def replica_pids(run_dir: Path) -> dict[str, int]:
    state = json.loads((run_dir / "replicas.json").read_text())
    return {r["name"]: r["pid"] for r in state["replicas"]}


def replica_runs(client: str, count: int, threads: int | None, students: int = 30) -> dict:
    """The same runs through nginx in front of ``count`` replicas (python -m explorer.serve), and
    each replica's peak memory with the 30 long sessions spread over them."""
    plans = {name: dataclasses.replace(plan, client=client) for name, plan in PLANS.items()}
    run_dir = ARTIFACTS / "bench-replicas"
    shutil.rmtree(run_dir, ignore_errors=True)
    extra = {"OMP_NUM_THREADS": str(threads)} if threads else {}
    with running_replicas(run_dir, count, **extra, **APP_ENV) as (url, _, _):
        pids = replica_pids(run_dir)
        servers = [*pids.values(), json.loads((run_dir / "replicas.json").read_text())["nginx_pid"]]
        alone, alone_cpu = with_cpu(servers, lambda: simulate_users(url, 1, 15, plans["no pause"]))
        klass, class_cpu = with_cpu(servers, lambda: simulate_users(url, students, 15, plans["class"]))
        rush, rush_cpu = with_cpu(servers, lambda: simulate_users(url, 20, 15, plans["no pause"]))
        models_mb = {name: peak_rss_mb(pid) for name, pid in pids.items()}
        simulate_users(url, 30, 15, plans["long"])
        long_mb = {name: peak_rss_mb(pid) for name, pid in pids.items()}
        served = served_by(run_dir / "nginx-access.log")
    cpu = (alone_cpu, class_cpu, rush_cpu)
    return {"runs": (alone, klass, rush), "models_mb": models_mb, "long_mb": long_mb, "served": served, "cpu": cpu}


def with_cpu(pids: list[int], run) -> tuple[LoadReport, float]:
    """``run()``'s report, and the CPU the processes ``pids`` spent per step meanwhile (ms)."""
    before = sum(cpu_seconds(pid) for pid in pids)
    report = run()
    return report, (sum(cpu_seconds(pid) for pid in pids) - before) / max(1, len(report.latencies)) * 1000


def served_by(access_log: Path) -> dict[str, int]:
    """How many queue joins (events) each replica's port answered, from nginx's access log."""
    counts: dict[str, int] = {}
    for line in access_log.read_text().splitlines():
        if "/queue/join" in line:
            port = line.rsplit(" ", 1)[-1]
            counts[port] = counts.get(port, 0) + 1
    return counts


def compare(one: dict, many: dict, count: int) -> None:
    """One process against ``count`` replicas, measured back to back in this run."""
    print(f"\nOne process against {count} replicas behind nginx (step round trip, ms; same machine, back to back)")
    print(f"{'run':36} {'one p50':>8} {'one p95':>8} {'N p50':>8} {'N p95':>8} {'steps/s':>12} {'CPU/step N':>11}")
    names = ("one user, no pause", "class: the students, think 1-3 s", "20 users, no pause")
    for name, a, b, cpu in zip(names, one["runs"], many["runs"], many["cpu"], strict=True):
        rates = f"{len(a.latencies) / a.seconds:.1f} / {len(b.latencies) / b.seconds:.1f}"
        print(f"{name:36} {a.median:8.0f} {a.percentile(0.95):8.0f} {b.median:8.0f} {b.percentile(0.95):8.0f} "
              f"{rates:>12} {cpu:11.0f}")  # fmt: skip
    print("(steps/s: one process / the replicas; CPU/step N: the replicas' and nginx's CPU ms per step)")
    for label, (alone, _, rush) in (("one process", one["runs"]), (f"{count} replicas", many["runs"])):
        print(f"20 users' p95 / one user's p95, {label}: {rush.percentile(0.95) / alone.percentile(0.95):.1f}")
    errors = sum(len(r.errors) + len(r.crosstalk) for r in many["runs"])
    print(f"errors and cross-talk through the replicas: {errors}")
    print(f"events answered per replica port (nginx's access log): {many['served']}")
    total = sum(many["long_mb"].values())
    target = 1.3 * one["long_mb"] + one["models_mb"]
    per = {k: ", ".join(f"{name} {mb:.0f}" for name, mb in many[k].items()) for k in ("models_mb", "long_mb")}
    print(f"peak RSS per replica, MB: with the models {per['models_mb']}; with 30 long sessions {per['long_mb']}")
    one_mb, models_mb = one["long_mb"], one["models_mb"]
    print(f"sum {total:.0f} MB; one process holding all 30: {one_mb:.0f} MB (its models alone {models_mb:.0f})")
    verdict = "met" if total <= target else "NOT met"
    print(f"target: sum <= 1.3 x {one_mb:.0f} + {models_mb:.0f} = {target:.0f} MB: {verdict}")


def gradio_alone(steps: int = 15) -> None:
    """Gradio's own floor: an event that does nothing (it returns its text), through the same
    queue and client, by one user and by 20 without pause. No app can answer faster on this machine."""
    import threading

    import gradio as gr

    from tests.browser.conftest import free_port
    from tests.browser.page_client import PageClient

    with gr.Blocks() as demo:
        text, state = gr.Textbox(), gr.State()
        gr.Button().click(lambda st, x: (st, x), [state, text], [state, text], api_name="noop", concurrency_limit=32)
    port = free_port()
    demo.queue(default_concurrency_limit=os.cpu_count()).launch(
        server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True
    )
    url = f"http://127.0.0.1:{port}"

    def user(latencies: list[float]) -> None:
        client = PageClient(url)
        for _ in range(steps):
            begin = time.perf_counter()
            client.predict("a", api_name="/noop")
            latencies.append((time.perf_counter() - begin) * 1000)

    user([])  # warm up
    print("\nGradio alone: an event that does nothing, same queue and client (round trip, ms)")
    p95 = {}
    for users in (1, 20):
        latencies: list[float] = []
        threads = [threading.Thread(target=user, args=(latencies,)) for _ in range(users)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        latencies.sort()
        p95[users] = latencies[int(0.95 * len(latencies))]
        print(f"  {users:>2} users: p50 {statistics.median(latencies):5.0f}  p95 {p95[users]:5.0f}")
    print(f"  20 users' p95 / one user's p95: {p95[20] / p95[1]:.1f}")
    demo.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-curve", action="store_true")
    parser.add_argument("--skip-server", action="store_true")
    parser.add_argument("--memory-only", action="store_true")
    parser.add_argument(
        "--replicas", type=int, help="also run everything through nginx and this many replicas, after one process"
    )
    parser.add_argument(
        "--replica-threads", type=int, help="PyTorch threads per replica (default: the cores shared out)"
    )
    parser.add_argument("--skip-floor", action="store_true", help="skip Gradio's own floor (a no-op event)")
    parser.add_argument("--students", type=int, default=30, help="how many students the class has (default 30)")
    parser.add_argument(
        "--client", choices=["page", "gradio_client"], default="page",
        help="the simulated users' client: 'page' speaks the queue protocol at a browser's cost (default); "
        "'gradio_client' costs ~65 ms of CPU a step on the server's own cores",
    )  # fmt: skip
    args = parser.parse_args()
    if args.memory_only:
        memory_run()
        return
    if not args.skip_curve:
        batch_curve()
    if args.replicas:
        one = server_runs(args.client, args.students)
        many = replica_runs(args.client, args.replicas, args.replica_threads, args.students)
        compare(one, many, args.replicas)
    elif not args.skip_server:
        server_runs(args.client, args.students)
    if not args.skip_floor:
        gradio_alone()


if __name__ == "__main__":
    main()
