"""What a browser sends is untrusted: links, kept sessions, session files (issue 26).

Each field of a snapshot is checked for type and range wherever it comes from; a file is read
header first, so a small file cannot make the server decompress a gigabyte; and whatever is
thrown at these readers, the answer is a Snapshot that keeps the page's ranges or an InputError.
"""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import explorer
from explorer import sampling
from explorer.analysis import session_file, snapshot
from explorer.errors import InputError, as_sentence
from explorer.present.tabs import TAB_IDS
from tests.test_analysis import stepped

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- links and kept sessions
@pytest.mark.parametrize(
    ("field", "value"),
    [("temperature", "inf"), ("temperature", "nan"), ("temperature", "-1"), ("temperature", "2.5"),
     ("top_p", "0"), ("top_p", "1e309"), ("top_k", "201"), ("seed", "-1"), ("seed", str(2**40)),
     ("layer", "-3"), ("query", "-1"), ("query", "5000")],
)  # fmt: skip
def test_a_link_out_of_the_pages_range_is_refused_by_name(field, value):
    """temperature=inf was accepted, kept by the browser as null, and broke every later visit."""
    with pytest.raises(InputError, match=field):
        snapshot.from_query({"model": "m", "text": "t", field: value})


KEPT = {"model": "smollm2-135m-instruct", "text": "The capital of France is", "generated": [5, 6], "forced": [1]}


@pytest.mark.parametrize(
    ("field", "value"),
    [("query", "abc"), ("temperature", "hot"), ("temperature", None), ("temperature", True), ("top_k", 2.5),
     ("seed", "0"), ("chat", 1), ("use_cache", "yes"), ("generated", "5,6"), ("generated", [5, True]),
     ("generated", [5, -2]), ("generated", [0] * 1025), ("forced", [2]), ("forced", [1, 1]), ("text", 7),
     ("model", ["m"]), ("head", 3), ("layer", 1.5), ("tab", None), ("text", "x" * 100_001)],
)  # fmt: skip
def test_a_kept_session_of_the_wrong_type_is_refused_by_name(field, value):
    with pytest.raises(InputError) as error:
        snapshot.checked_snapshot({**KEPT, field: value})
    assert (field if field != "forced" or value == [2] else "forced") in str(error.value)


def test_the_pages_own_values_pass_and_whole_floats_count_as_whole():
    snap = snapshot.checked_snapshot({**KEPT, "temperature": 2, "top_k": 40.0, "top_p": 0.05, "seed": 2**32 - 1})
    assert (snap.temperature, snap.top_k, snap.top_p, snap.seed) == (2.0, 40, 0.05, 2**32 - 1)
    assert isinstance(snap.top_k, int) and snapshot.checked_snapshot({**KEPT, "tab": "sideways"}).tab == "self"


def test_sampling_settings_refuse_what_no_control_offers():
    for bad in ({"temperature": math.inf}, {"temperature": math.nan}, {"top_p": math.nan}, {"seed": 2**40},
                {"seed": -1}):  # fmt: skip
        with pytest.raises(InputError):
            sampling.SamplingSettings(**bad)


def test_messages_joined_to_another_sentence_are_sentences():
    assert as_sentence("choose 0 to 29") + " A new one is shown." == "Choose 0 to 29. A new one is shown."
    assert as_sentence(InputError("Done.")) == "Done."


# ---------------------------------------------------------------- files that promise more than they weigh
def archive(entries: dict[str, np.ndarray | tuple[np.dtype, tuple, int]]) -> bytes:
    """A .npz: arrays as they are, or (dtype, shape, zero bytes) written as a stream of zeros."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, value in entries.items():
            with zf.open(f"{name}.npy", "w", force_zip64=True) as member:
                if isinstance(value, np.ndarray):
                    np.lib.format.write_array(member, value, allow_pickle=False)
                    continue
                dtype, shape, size = value
                np.lib.format.write_array_header_1_0(member, {"descr": np.dtype(dtype).str, "fortran_order": False,
                                                             "shape": shape})  # fmt: skip
                chunk = bytes(1 << 24)
                for _ in range(size // len(chunk)):
                    member.write(chunk)
    return buffer.getvalue()


def description(generated=(), **fields) -> np.ndarray:
    raw = {"format": snapshot.FORMAT, "version": snapshot.VERSION,
           "snapshot": {"model": "tiny", "text": "hello", "generated": list(generated), **fields}}  # fmt: skip
    return np.frombuffer(json.dumps(raw).encode(), dtype=np.uint8)


GIB = 1 << 30


def test_a_compressed_gigabyte_is_never_decompressed(tmp_path, checkpoints):
    """A 1 MB file holding a compressed GiB of zeros as an attention array: refused when its
    shape is compared with the live session's, before it is read. Measured in a fresh process:
    its peak memory grows by less than 100 MB (it grew by ~1,250 MB when every array was read first)."""
    token_ids = explorer.GenerationSession(explorer.load_model(str(checkpoints["gpt2"])), "hello").token_ids
    data = archive({
        "description": description(), "token_ids": np.array(token_ids, np.int64),
        "self_attention.0": (np.float16, (4, GIB // 8), GIB),
    })  # fmt: skip
    assert len(data) < 2 << 20
    path = tmp_path / "bomb.npz"
    path.write_bytes(data)
    script = f"""
import resource, explorer
from explorer.analysis import snapshot
from explorer.errors import InputError
loaded = explorer.load_model({str(checkpoints["gpt2"])!r})
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
snap, arrays = snapshot.read_bytes(open({str(path)!r}, "rb").read())
try:
    snapshot.attention_difference(snapshot.restore(loaded, snap), arrays)
except InputError as error:
    print("refused:", error)
print("grew MB", (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "refused: The saved session lacks self_attention.0, or its shape differs" in run.stdout, run.stdout
    grew = int(run.stdout.split("grew MB")[1])
    assert grew < 100, run.stdout


@pytest.mark.parametrize(
    ("entries", "says"),
    [({"description": (np.uint8, (GIB,), GIB), "token_ids": np.zeros(2, np.int64)}, "description is larger"),
     ({"description": description(), "token_ids": (np.int64, (GIB // 8,), GIB)}, "more than 1024 tokens"),
     ({"description": description(), "token_ids": np.zeros(2, np.int64), "other": np.zeros(2)}, "not a session"),
     ({"description": description(), "token_ids": np.zeros((2, 2), np.int64)}, "not a session"),
     ({"description": description(), "token_ids": np.zeros(2, np.float32)}, "not a session"),
     ({"description": description()}, "not a session")],
)  # fmt: skip
def test_an_archive_no_session_could_be_is_refused_from_its_headers(entries, says):
    with pytest.raises(InputError, match=says):
        snapshot.read_bytes(archive(entries))


def test_an_archive_of_many_entries_is_refused_before_its_directory_is_read():
    entries = {f"self_attention.{i}": np.zeros(1, np.float16) for i in range(session_file.MAX_ENTRIES + 1)}
    with pytest.raises(InputError, match="more than a saved session can"):
        snapshot.read_bytes(archive({"description": description(), "token_ids": np.zeros(2, np.int64), **entries}))


def test_a_real_file_reads_lazily_and_restores(checkpoints):
    loaded = explorer.load_model(str(checkpoints["gpt2"]))
    session = stepped(loaded, steps=2)
    data = snapshot.save_bytes(snapshot.snapshot_of("tiny", session), session)
    snap, arrays = snapshot.read_bytes(data)
    assert isinstance(arrays, session_file.SavedArrays) and arrays.shape("token_ids") == (len(session.token_ids),)
    assert snapshot.attention_difference(snapshot.restore(loaded, snap), arrays) <= 1e-3


# ---------------------------------------------------------------- fuzz: only Snapshots in range, or InputErrors
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
FIELDS = list(snapshot.Snapshot.__dataclass_fields__)
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_in_range(snap: snapshot.Snapshot) -> None:
    """Every field as the page's controls could have set it."""
    assert isinstance(snap.model, str) and isinstance(snap.text, str) and isinstance(snap.chat, bool)
    assert sampling.TEMPERATURE_RANGE[0] <= snap.temperature <= sampling.TEMPERATURE_RANGE[1]
    assert sampling.TOP_P_RANGE[0] <= snap.top_p <= sampling.TOP_P_RANGE[1]
    assert type(snap.top_k) is int and type(snap.seed) is int and type(snap.layer) is int
    assert sampling.SEED_RANGE[0] <= snap.seed <= sampling.SEED_RANGE[1]
    assert all(type(t) is int and t >= 0 for t in snap.generated)
    assert all(0 <= i < len(snap.generated) for i in snap.forced) and snap.tab in TAB_IDS
    assert snap.query is None or type(snap.query) is int


@FUZZ
@given(st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=6))
def test_fuzz_a_kept_session(changes):
    try:
        snap = snapshot.checked_snapshot({**KEPT, **changes})
    except InputError:
        return
    assert_in_range(snap)


@FUZZ
@given(st.dictionaries(st.sampled_from([*FIELDS, "cache", "tokens"]), st.text(max_size=40), max_size=6))
def test_fuzz_a_link(params):
    try:
        snap = snapshot.from_query({"model": "m", "text": "t", **params})
    except InputError:
        return
    if snap is not None:
        assert_in_range(snap)


@pytest.fixture(scope="module")
def saved_file(checkpoints) -> bytes:
    loaded = explorer.load_model(str(checkpoints["gpt2"]))
    session = stepped(loaded, steps=2)
    return snapshot.save_bytes(snapshot.snapshot_of("tiny", session), session)


@FUZZ
@given(data=st.data())
def test_fuzz_a_session_file(saved_file, data):
    """Bytes changed, cut or added anywhere: a snapshot in range and arrays by their headers, or a refusal."""
    raw = bytearray(saved_file)
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    try:
        snap, arrays = snapshot.read_bytes(bytes(raw))
        for name in arrays:
            arrays[name]
    except InputError:
        return
    assert_in_range(snap)


# ---------------------------------------------------------------- a class arriving at a fresh server
def test_many_first_loads_at_once_in_a_fresh_process(checkpoints):
    """transformers' lazy module raised "cannot import name 'AutoTokenizer'" when several threads
    imported it at once (1 run in 5 with 45 students). Three fresh processes, 16 threads each."""
    script = f"""
import threading
from pathlib import Path
from explorer.loading.checkpoints import load_tokenizer
barrier, errors = threading.Barrier(16), []
def load():
    barrier.wait()
    try:
        load_tokenizer(Path({str(checkpoints["gpt2"])!r}))
    except Exception as error:
        errors.append(repr(error))
threads = [threading.Thread(target=load) for _ in range(16)]
[t.start() for t in threads]
[t.join() for t in threads]
print(errors)
"""
    for _ in range(3):
        run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0 and run.stdout.strip() == "[]", run.stdout + run.stderr


# ---------------------------------------------------------------- words that say something false (issue 26)
def test_switch_heads_off_names_a_forced_token_as_the_users_choice(checkpoints):
    from explorer.analysis import ablation
    from explorer.present import insights
    from explorer.present.views import ExplorerState

    session = explorer.GenerationSession(explorer.load_model(str(checkpoints["gpt2"])), "the cat sat")
    session.force(session.top_candidates()[4].token_id)  # far from the greedy choice
    state = ExplorerState("tiny", session=session)
    state.switched_off = ablation.parse("0.mlp", session, "zero")
    state.keep("ablation", ablation.ablate(session, state.switched_off))
    assert ablation.ablate(session, state.switched_off).departs_at == session.prompt_length
    said = insights.ablation_summary(state)
    assert "you chose" in said and "the model chose" not in said


def test_the_architecture_text_names_no_chart_the_tab_may_not_show():
    """The relative-position chart is on screen for T5 only: the shared text cannot say 'above'."""
    from explorer.ui.tabs import architecture

    assert "chart above" not in architecture.ARCHITECTURE and "with a T5 model" in architecture.ARCHITECTURE


def test_the_cache_on_line_breaks_where_the_cache_was_off(checkpoints):
    """Steps taken with the cache off are gaps in the cache-on line, not a line drawn across them."""
    from explorer.present import views
    from explorer.present.views import ExplorerState

    session = explorer.GenerationSession(explorer.load_model(str(checkpoints["gpt2"])), "the cat sat")
    for use_cache in (True, True, False, False, True):
        session.set_use_cache(use_cache)
        session.step()
    traces = {t["name"]: t for t in views.timing_figure(ExplorerState("tiny", session=session))["data"]}
    on, off = traces["cache on"]["y"], traces["cache off"]["y"]
    assert [v is None for v in on] == [False, False, True, True, False]
    assert [v is None for v in off] == [True, True, False, False, True]
    assert traces["cache on"]["x"] == traces["cache off"]["x"] == [t.position for t in session.timings]


def zip_of_arrays_patched(offset_in_header: int, value: bytes) -> bytes:
    """A zip with a session's two entry names, its first entry's local and central headers patched
    (the compression method at offset 8 of the local header, the flags at 6)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, array in (("description", np.frombuffer(b"{}", np.uint8)), ("token_ids", np.array([1], np.int64))):
            with archive.open(f"{name}.npy", "w") as member:
                np.save(member, array)
    data = bytearray(buffer.getvalue())
    local = data.index(b"PK\x03\x04")
    central = data.index(b"PK\x01\x02")
    data[local + offset_in_header : local + offset_in_header + 2] = value
    data[central + offset_in_header + 2 : central + offset_in_header + 4] = value  # the central header is 2 bytes on
    return bytes(data)


@pytest.mark.parametrize(
    "patched",
    [zip_of_arrays_patched(8, b"\x63\x00"), zip_of_arrays_patched(6, b"\x01\x00")],
    ids=["an unknown compression method", "an encrypted entry"],
)
def test_a_zip_python_cannot_read_is_refused_with_the_sentence(patched):
    """zipfile raises NotImplementedError and RuntimeError for these (the fuzz test found them)."""
    with pytest.raises(InputError, match="not a session saved by Decoder Explorer"):
        snapshot.read_bytes(patched)


def test_a_refusal_writes_its_limits_as_a_person_reads_them():
    """An API caller was told "from 0 to 4.29497e+09" (fresh eyes)."""
    with pytest.raises(InputError) as refused:
        snapshot.checked_snapshot({**KEPT, "seed": -3})
    assert "from 0 to 4,294,967,295 (it is -3)" in str(refused.value)
    with pytest.raises(InputError) as refused:
        snapshot.checked_snapshot({**KEPT, "top_p": 0})
    assert "from 0.05 to 1 (it is 0)" in str(refused.value)
