"""GGUF files of every architecture the explorer reads, written by the tests with the ``gguf``
library's writer (tests/gguf_builders.py), against transformers reading the same file."""

from __future__ import annotations

import threading

import pytest
import torch

import explorer
from explorer.loading import ModelLoadError
from explorer.model import Record
from tests.gguf_builders import write_tiny_gguf
from tests.test_cache import check_cache_parity

TOL = 1e-4
TEXT = "The quick brown fox: def add(a, b) in 2017."
FILES = [("llama", "Q8_0"), ("llama", "Q4_K"), ("qwen2", "Q8_0"), ("qwen2", "Q4_K"), ("qwen3", "Q8_0"),
         ("gemma3", "Q8_0"), ("gemma3", "Q4_K"), ("phi3", "Q8_0"),
         # the other types the docs name: Q4_1 is the embedded SmolLM2's own
         ("llama", "Q4_0"), ("llama", "Q4_1"), ("llama", "Q5_0"), ("llama", "F16"), ("llama", "BF16")]  # fmt: skip
FAMILY = {"gemma3": "gemma3_text"}


@pytest.mark.parametrize(("arch", "quant"), FILES)
def test_a_gguf_file_matches_transformers_reading_it(tmp_path, arch, quant):
    import gguf
    from transformers import AutoModelForCausalLM

    path = write_tiny_gguf(tmp_path / f"tiny-{arch}.{quant}.gguf", arch, quant)
    kinds = {t.tensor_type.name for t in gguf.GGUFReader(str(path)).tensors if len(t.shape) == 2}
    assert kinds == {quant}  # every matrix is stored as asked
    ref = AutoModelForCausalLM.from_pretrained(
        str(tmp_path), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    loaded = explorer.load_model(str(path), progress=False)
    assert loaded.config.family == FAMILY.get(arch, arch) and loaded.name == path.name
    ids = torch.tensor([loaded.tokenizer(TEXT)["input_ids"]])
    assert ids.tolist() == [ref_ids(tmp_path, path, TEXT)]  # the same tokenizer, from the file's metadata
    with torch.no_grad():
        expected = ref(ids, output_attentions=True)
        ours = loaded.model(ids, record=Record.of("attention"))
    assert (ours.logits - expected.logits).abs().max() <= TOL
    for layer in range(loaded.config.n_layers):
        assert (ours.trace.self_attention(layer) - expected.attentions[layer]).abs().max() <= TOL


def ref_ids(folder, path, text) -> list[int]:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder), gguf_file=path.name)(text)["input_ids"]


def test_gemma3_from_gguf_keeps_its_global_layers_and_steps_as_with_the_cache_off(gguf_file):
    """llama.cpp's Gemma 3: every sixth layer global, the others a window (6 in this file)."""
    loaded = explorer.load_model(str(gguf_file), progress=False)
    assert [loaded.config.window_of(i) for i in range(6)] == [6, 6, 6, 6, 6, None]
    check_cache_parity(loaded, "A window of six slides along")


@pytest.mark.parametrize("arch", ["qwen2", "gemma3"])
def test_a_gguf_file_is_converted_once(tmp_path, monkeypatch, arch):
    """The second load reads the cache: the same weights, and the same tokenizer, whatever class
    transformers gave the file's (a gemma3 file's is GemmaTokenizer)."""
    from explorer.loading import checkpoints

    monkeypatch.setenv("DECODER_EXPLORER_CACHE", str(tmp_path / "cache"))
    path = write_tiny_gguf(tmp_path / "tiny.gguf", arch)
    first = explorer.load_model(str(path), progress=False)
    converted = [entry for entry in (tmp_path / "cache" / "gguf").iterdir() if entry.is_dir()]  # not its lock
    assert len(converted) == 1 and (converted[0] / "model.safetensors").is_file()

    def no_second_conversion(*_args, **_kwargs):
        raise AssertionError("converted again")

    monkeypatch.setattr(checkpoints, "read_gguf", no_second_conversion)
    again = explorer.load_model(str(path), progress=False)
    for text in (TEXT, "  two spaces, <|endoftext|> and ü"):
        assert again.tokenizer(text)["input_ids"] == first.tokenizer(text)["input_ids"]
    ids = torch.tensor([again.tokenizer(TEXT)["input_ids"]])
    with torch.no_grad():
        assert torch.equal(first.model(ids).logits, again.model(ids).logits)


def test_a_process_that_waited_for_a_conversion_reads_it_instead_of_converting_again(tmp_path, monkeypatch):
    """Two processes starting on an empty cache (two replicas, two test workers): the one that finds
    the conversion under way waits for it and reads the result (the lock of loading/file_lock.py;
    flock holds between two open files of one process too, so a thread stands in for a process)."""
    from explorer.loading import checkpoints, file_lock

    path, folder = write_tiny_gguf(tmp_path / "tiny.gguf", "qwen2"), tmp_path / "cache" / "tiny"
    waiting, results = threading.Event(), []
    read_converted = checkpoints.read_converted

    def read_and_say_so(*args):
        waiting.set()
        return read_converted(*args)

    monkeypatch.setattr(checkpoints, "read_converted", read_and_say_so)
    with file_lock.held(folder.with_name(".tiny.lock")):  # this "process" is converting
        other = threading.Thread(target=lambda: results.append(checkpoints.load_gguf_with_cache(path, folder, False)))
        other.start()
        assert waiting.wait(30)  # the other found no cache and now waits for the lock
        checkpoints.convert_into(path, folder, progress=False)
    other.join(60)
    assert results and results[0][3] is False  # read, not converted again


def test_gguf_files_the_explorer_cannot_read_say_why(tmp_path):
    import gguf

    writer = gguf.GGUFWriter(str(tmp_path / "mamba.gguf"), "mamba")
    writer.add_token_list(["a", "b"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelLoadError, match=r"'mamba' model; the explorer reads GGUF files of the llama, qwen2"):
        explorer.load_model(str(tmp_path / "mamba.gguf"), progress=False)
    (tmp_path / "broken.gguf").write_bytes(b"not a gguf file at all")
    with pytest.raises(ModelLoadError, match=r"broken\.gguf is not a readable GGUF file"):
        explorer.load_model(str(tmp_path / "broken.gguf"), progress=False)


def test_a_gguf_file_is_offered_only_inside_the_allowed_folders(tmp_path, monkeypatch, gguf_file):
    from explorer.present import model_store

    monkeypatch.setenv(model_store.MODEL_DIRS_ENV, str(gguf_file.parent))
    assert model_store.resolve_custom(gguf_file.name) == str(gguf_file)
    elsewhere = write_tiny_gguf(tmp_path / "elsewhere.gguf", "llama")
    with pytest.raises(ModelLoadError, match="not offered here"):
        model_store.resolve_custom(str(elsewhere))
