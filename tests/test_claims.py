"""Claims of the docs that no other test reads (issue 28's list): each checked against the code
that makes it true, so that changing one without the other fails here."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import explorer
from explorer import batching, native_memory

ROOT = Path(__file__).resolve().parents[1]


def test_trust_remote_code_is_never_set():
    """docs/serving.md: "trust_remote_code is never set" (a checkpoint's own code never runs)."""
    for path in (ROOT / "explorer").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "trust_remote_code":
                assert isinstance(node.value, ast.Constant) and node.value.value is False, f"{path}:{node.lineno}"


def test_no_memory_is_returned_when_told_0(monkeypatch):
    """docs/serving.md: DECODER_EXPLORER_RETURN_MEMORY_S=0 means never."""
    monkeypatch.setenv(native_memory.TRIM_ENV, "0")
    assert native_memory.keep_returning_free_memory() is None
    monkeypatch.setenv(native_memory.TRIM_ENV, "0.5")
    returner = native_memory.keep_returning_free_memory()
    if native_memory.glibc() is not None:  # glibc here: a returner every half second
        assert returner is not None and returner.every_s == 0.5
        returner.stop()


def test_t5_sessions_and_branches_step_alone_in_a_batch(checkpoints):
    """docs/serving.md: a session with an intervention (a branch), the cache off, or a T5 model
    steps alone; a plain cached session joins the batch."""
    t5 = explorer.load_model(str(checkpoints["t5"]), progress=False)
    gpt2 = explorer.load_model(str(checkpoints["gpt2"]), progress=False)
    plain = explorer.GenerationSession(gpt2, "The quick brown fox")
    assert batching.can_join_batch(plain)
    assert not batching.can_join_batch(explorer.GenerationSession(t5, "twenty-one"))
    assert not batching.can_join_batch(plain.with_interventions(explorer.ablate_heads({0: [0]})))
    assert not batching.can_join_batch(explorer.GenerationSession(gpt2, "The quick brown fox", use_cache=False))
    stats = batching.BatchStats()
    branch = plain.with_interventions(explorer.ablate_heads({0: [1]}))
    results = batching.step_together([plain, branch, explorer.GenerationSession(gpt2, "Hello there")], stats)
    assert all(not isinstance(r, Exception) for r in results) and stats.batches == [2]  # the branch alone


@pytest.mark.parametrize("env", [None, "5"])
def test_steps_wait_together_up_to_a_batch(monkeypatch, env):
    """docs/serving.md: up to 32 Steps and Generates (DECODER_EXPLORER_STEP_CONCURRENCY) wait
    together for the step batcher; the page's Step and Generate events are in that pool."""
    from explorer.ui import app

    if env is None:
        monkeypatch.delenv(app.STEP_CONCURRENCY_ENV, raising=False)
    else:
        monkeypatch.setenv(app.STEP_CONCURRENCY_ENV, env)
    demo = app.build_demo()
    steps = [dep for dep in demo.fns.values() if dep.concurrency_id == "steps"]
    assert {dep.fn.__name__ for dep in steps} == {"on_step", "on_generate"}
    expected = batching.MAX_BATCH if env is None else int(env)
    assert batching.MAX_BATCH == 32 and all(dep.concurrency_limit == expected for dep in steps)


@pytest.mark.parametrize("secret", [None, "an operator's own key"])
def test_the_kept_session_is_encrypted_with_the_browser_secret(monkeypatch, secret):
    """docs/serving.md: what the browser keeps is encrypted with DECODER_EXPLORER_BROWSER_SECRET,
    or with a built-in key that outlives a restart (two builds, as two processes would, agree).
    tests/browser/test_reload.py checks that what the browser holds is not the session in clear."""
    import gradio as gr

    from explorer.ui import app

    if secret is None:
        monkeypatch.delenv(app.SECRET_ENV, raising=False)
    else:
        monkeypatch.setenv(app.SECRET_ENV, secret)
    kept = [[b for b in app.build_demo().blocks.values() if isinstance(b, gr.BrowserState)] for _ in range(2)]
    # the session, the lessons done, the workshop seat, the workshops this browser started
    assert [len(states) for states in kept] == [4, 4]
    secrets = {state.secret for states in kept for state in states}
    assert secrets == {secret or app.browser_secret()} and len(next(iter(secrets))) >= 16


def test_the_status_line_counts_down_the_last_64_positions(checkpoints):
    """docs/using.md: the status line counts down the last 64 positions before the session's cap."""
    from explorer.present.views import ExplorerState, status_line

    loaded = explorer.load_model(str(checkpoints["gpt2"]), progress=False)
    prompt = len(explorer.GenerationSession(loaded, "The quick brown fox").token_ids)
    cap = prompt + 66
    session = explorer.GenerationSession(loaded, "The quick brown fox", max_positions=cap)
    state = ExplorerState("tiny", session)
    assert "room for" not in status_line(state)  # 66 left: not yet
    session.force(5)
    session.force(5)  # 64 left (token 5 is not the end token)
    assert f"room for 64 more of the {cap} positions" in status_line(state)
    while len(session.token_ids) < cap:
        session.force(5)
    assert f"the session is full ({cap} positions): Undo or Reset" in status_line(state)


def test_the_status_line_counts_a_translators_source_and_translation(checkpoints):
    """A translator's status line counts the source tokens the encoder read and the tokens
    translated so far (not "1 tokens" for the start token, nor a prompt it never had)."""
    from explorer.present.views import ExplorerState, status_line

    loaded = explorer.load_model(str(checkpoints["marian"]), progress=False)
    session = explorer.GenerationSession(loaded, "twenty-one")
    line = status_line(ExplorerState("tiny", session))
    assert f"{len(session.source_ids)} source tokens · 0 tokens translated" in line and "prompt" not in line
    session.step()
    assert "1 token translated" in status_line(ExplorerState("tiny", session))
    decoder = explorer.GenerationSession(explorer.load_model(str(checkpoints["gpt2"]), progress=False), "Hi")
    assert f"{len(decoder.token_ids)} tokens (0 generated)" in status_line(ExplorerState("tiny", decoder))


@pytest.mark.parametrize(
    ("family", "setting", "says"),
    [
        ("llama", {"rope_parameters": {"rope_type": "linear", "factor": 2.0}}, "RoPE scaling 'linear' is not"),
        ("llama", {"rope_parameters": None, "rope_scaling": {"type": "dynamic"}}, "RoPE scaling 'dynamic' is not"),
        ("gemma3_text", {"final_logit_softcapping": 30.0}, "sets final_logit_softcapping, not supported yet"),
        ("gemma3_text", {"attn_logit_softcapping": 50.0}, "sets attn_logit_softcapping, not supported yet"),
    ],
)
def test_what_cannot_be_read_is_refused_by_name(checkpoints, family, setting, says):
    """docs/architecture.md: RoPE scaling and Gemma's soft-capping are refused by name."""
    import json

    from explorer.loading import ModelLoadError, families

    config = json.loads((checkpoints[family] / "config.json").read_text()) | setting
    with pytest.raises(ModelLoadError, match=re.escape(says)):
        families.convert(config, {})


def test_an_exported_page_is_about_5_mb_and_attention_past_4_million_weights_is_averaged(checkpoints):
    """docs/using.md: the web page carries plotly.js (~5 MB) and opens offline; attention past
    4 million weights a kind keeps the average of the heads."""
    from explorer.analysis import export
    from explorer.analysis.export_html import export_html

    loaded = explorer.load_model(str(checkpoints["gpt2"]), progress=False)
    session = explorer.GenerationSession(loaded, "The quick brown fox")
    session.step()
    page = export_html("tiny", session)
    assert 4.0e6 < len(page.encode()) < 6.0e6 and "<script src=" not in page  # plotly inside, nothing fetched
    assert export.MAX_CELLS == 4_000_000 == inspect.signature(export_html).parameters["max_cells"].default
    c, n = session.config, len(session.token_ids)
    everything = c.n_layers * (c.n_heads + 1) * n * n  # every head and their mean
    assert export.attention_exports(session, max_cells=everything)[0].choices == ["mean", *map(str, range(c.n_heads))]
    assert export.attention_exports(session, max_cells=everything - 1)[0].choices == ["mean"]
