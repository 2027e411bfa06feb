"""The model's one store of blocks (explorer/model/paged.py) and what shares it: every session's
cache and kept queries and keys, batched steps that read and write it with one call per layer,
and forks of a session (a class following its teacher) that share blocks until one writes."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import explorer
from explorer.batching import batched_step
from explorer.model.paged import BLOCK, PagedSequence, PagedStore
from tests.test_batching import assert_same


def store(layers: int = 2, heads: int = 2, head_dim: int = 4) -> PagedStore:
    return PagedStore(layers, {"keys": heads}, head_dim)


def written(sequence: PagedSequence, layer: int, start: int, n: int, value: float) -> torch.Tensor:
    rows = torch.full((2, n, 4), value)
    sequence.prepare(start, start + n)
    sequence.write(layer, start, {"keys": rows})
    sequence.length = start + n
    return rows


def test_a_sequence_reads_back_what_it_wrote_across_blocks():
    paged = store()
    first, second = PagedSequence(paged), PagedSequence(paged)
    rows = torch.arange(2 * 40 * 4, dtype=torch.float32).view(2, 40, 4)
    for sequence in (first, second):  # interleaved: the second's blocks lie between the first's
        for start in range(0, 40, 10):
            sequence.prepare(start, start + 10)
            sequence.write(1, start, {"keys": rows[:, start : start + 10] + (sequence is second)})
    assert torch.equal(first.read(1, "keys", 40), rows)
    assert torch.equal(second.read(1, "keys", 40), rows + 1)
    assert torch.equal(second.read(1, "keys", 33, start=5), rows[:, 5:33] + 1)


def test_blocks_go_back_to_the_store_when_a_sequence_is_gone():
    paged = store()
    sequence = PagedSequence(paged)
    written(sequence, 0, 0, 3 * BLOCK, 1.0)
    assert paged.used_blocks == 3
    del sequence
    gc.collect()
    assert paged.used_blocks == 0


def test_a_fork_shares_blocks_and_copies_one_on_write():
    paged = store()
    original = PagedSequence(paged)
    written(original, 0, 0, BLOCK + 5, 1.0)  # two blocks, the second partly filled
    fork = original.fork()
    assert paged.used_blocks == 2
    written(fork, 0, BLOCK + 5, 1, 7.0)  # the fork's own token: its partial block is copied first
    assert paged.used_blocks == 3
    written(original, 0, BLOCK + 5, 1, 3.0)  # the original's own token, in its own block
    assert float(original.read(0, "keys", BLOCK + 6)[0, -1, 0]) == 3.0
    assert float(fork.read(0, "keys", BLOCK + 6)[0, -1, 0]) == 7.0
    assert torch.equal(original.read(0, "keys", BLOCK + 5), fork.read(0, "keys", BLOCK + 5))  # the shared past


def test_the_store_grows_without_losing_what_it_holds():
    paged = store()
    sequences = [PagedSequence(paged) for _ in range(5)]
    for i, sequence in enumerate(sequences):
        written(sequence, 1, 0, 300, float(i))  # 5 x 19 blocks: more than the store's first 64
    assert paged.n_blocks >= 5 * 19
    for i, sequence in enumerate(sequences):
        assert torch.equal(sequence.read(1, "keys", 300), torch.full((2, 300, 4), float(i)))


@pytest.fixture(scope="module")
def llama(checkpoints):
    return explorer.load_model(str(checkpoints["llama"]), progress=False)


def test_every_session_of_a_model_keeps_its_cache_and_rows_in_the_models_stores(llama):
    sessions = [explorer.GenerationSession(llama, text) for text in ("The", "Attention is all you need")]
    assert sessions[0].cache.store is sessions[1].cache.store is llama.model.cache_store()
    kept = [s.attention.self_inputs.kept.sequence.store for s in sessions]
    assert kept[0] is kept[1] is llama.model.record_store()


def test_a_batch_across_block_boundaries_equals_each_alone(llama):
    """Lengths on both sides of a block's end (15, 16, 17 tokens) and steps that cross it."""
    token = next(t for t in range(5, llama.config.vocab_size) if t != llama.config.eos_token_id)
    texts = ["The"] * 3
    together = [explorer.GenerationSession(llama, t) for t in texts]
    alone = [explorer.GenerationSession(llama, t) for t in texts]
    for extra, (a, b) in enumerate(zip(together, alone, strict=True)):
        for session in (a, b):
            for _ in range(BLOCK - 3 - len(session.token_ids) + extra + 1):
                session.force(token)
    for _ in range(4):
        batched_step(together)
        for session in alone:
            session.step()
    for a, b in zip(together, alone, strict=True):
        assert_same(a, b)


def test_a_fork_steps_on_as_its_own_session_and_leaves_the_original_as_it_was(llama):
    """A student's fork of the teacher's session goes its own way; the teacher's stays the same."""
    teacher = explorer.GenerationSession(llama, "Transformers generate text one token at a time.")
    for _ in range(3):
        teacher.step()
    before = [teacher.self_attention(layer) for layer in range(llama.config.n_layers)]
    student = teacher.fork()
    assert_same(student, teacher)
    token = next(
        t for t in range(5, llama.config.vocab_size) if t not in (llama.config.eos_token_id, teacher.token_ids[-1])
    )
    student.undo()
    student.force(token)  # the student's own token, where the teacher had its own
    student.step()
    teacher.step()
    reference = explorer.GenerationSession(llama, teacher.text)
    reference.replay(student.generated_ids, forced={len(student.generated_ids) - 2})
    assert_same(student, reference)
    for layer, probs in enumerate(before):  # the teacher's past rows, unchanged by the student's steps
        np.testing.assert_array_equal(teacher.self_attention(layer)[:, : probs.shape[1], : probs.shape[2]], probs)
    again = explorer.GenerationSession(llama, teacher.text)
    again.replay(teacher.generated_ids)
    assert_same(teacher, again)


def test_thirty_forks_hold_about_one_sessions_blocks(llama):
    """A class of thirty following one teacher: the stores hold little more than the teacher's."""
    teacher = explorer.GenerationSession(llama, " ".join(["word"] * 40))
    stores = llama.model.cache_store(), llama.model.record_store(), llama.model.record_key_store()
    gc.collect()
    before = sum(store.used_blocks for store in stores)
    students = [teacher.fork() for _ in range(30)]
    assert sum(store.used_blocks for store in stores) == before
    teacher.step()  # the teacher's next token: its last block (shared) is copied, once per store
    assert sum(store.used_blocks for store in stores) <= before + 2
    assert all(s.token_ids == students[0].token_ids for s in students)


def test_the_store_gives_memory_back_when_its_sequences_are_gone():
    paged = store()
    sequences = [PagedSequence(paged) for _ in range(6)]
    for sequence in sequences:
        written(sequence, 0, 0, 30 * BLOCK, 1.0)  # 180 blocks: grown past its first 64
    grown = paged.n_blocks
    keep = sequences[0]
    del sequences, sequence
    gc.collect()
    assert paged.used_blocks == 30 and paged.n_blocks < grown  # the class left: the store halved
    assert torch.equal(keep.read(0, "keys", 30 * BLOCK), torch.full((2, 30 * BLOCK, 4), 1.0))


def test_slots_never_written_hold_zeros_not_whatever_memory_held():
    """A batch reads every row up to the longest row's length: the slots past a row's own length
    get weight 0, and 0 x NaN (memory never written) would be NaN. Found by the suite from a fresh
    clone: a tiny llama's batched step drew token 0 from NaN logits."""
    paged = store()
    sequence = PagedSequence(paged)
    written(sequence, 1, 0, 5, 2.0)
    written(PagedSequence(paged), 0, 0, 200 * BLOCK, 1.0)  # grows the store past its first blocks
    block = sequence.blocks[0]
    assert torch.equal(paged.tensors["keys"][1][block * BLOCK + 5 : (block + 1) * BLOCK], torch.zeros(BLOCK - 5, 2, 4))
    held = [b for s in (sequence,) for b in s.blocks]  # the free blocks are never read: left untouched
    for layer in paged.tensors["keys"]:
        assert not layer.view(-1, BLOCK, 2, 4)[held].isnan().any()


def test_a_block_is_zeroed_when_handed_out_whatever_its_memory_held():
    """The store's memory is not zeroed when it grows (its free blocks stay untouched, taking no
    resident memory): a block is zeroed when a sequence takes it."""
    paged = store()
    written(PagedSequence(paged), 0, 0, 3 * BLOCK, 1.0)
    gc.collect()  # the sequence is gone: its blocks are free again
    for layer in paged.tensors["keys"]:
        layer.fill_(float("nan"))  # what never-written (or reused) memory may hold
    sequence = PagedSequence(paged)
    written(sequence, 0, 0, 5, 2.0)
    assert torch.equal(
        sequence.read(0, "keys", BLOCK), torch.cat([torch.full((2, 5, 4), 2.0), torch.zeros(2, BLOCK - 5, 4)], 1)
    )
    assert torch.equal(sequence.read(1, "keys", BLOCK), torch.zeros(2, BLOCK, 4))


def resident_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_a_stores_free_blocks_take_no_resident_memory():
    """30 SmolLM2 sessions left ~45 of the store's 432 blocks free after its last growth by half:
    100 MB the process held for nothing while they were zeros. Untouched, they cost no memory."""
    paged = PagedStore(1, {"keys": 16}, 64)  # 4 kB a position
    sequence = PagedSequence(paged)
    sequence.prepare(0, 1)
    before = resident_mb()
    paged.allocate(1)  # the one block more
    with paged.lock:
        paged._grow(1600)  # 1,600 blocks: 100 MB of free blocks
    assert paged.nbytes > 100 * 2**20
    assert resident_mb() - before < 25


def test_a_session_with_the_full_cache_keeps_its_keys_once(llama):
    """The heatmaps read their keys from the cache's own blocks (SmolLM2 kept every key twice: 23 kB
    of its 138 kB a position), stepping alone, batched, after an undo and in a fork; the heatmaps
    equal those of a session without the cache (whose keys are kept apart)."""
    text = " ".join(["word"] * (BLOCK - 2))
    gc.collect()
    key_store = llama.model.record_key_store()
    before = key_store.used_blocks
    session, other = explorer.GenerationSession(llama, text), explorer.GenerationSession(llama, text + " word")
    session.step()
    session.undo()
    for _ in range(4):  # across a block's end
        batched_step([session, other])
    fork = session.fork()
    batched_step([fork, session])
    assert key_store.used_blocks == before
    for held in (session, other, fork):
        assert held.attention.self_inputs.kept.key_sequence is held.cache.sequence
    reference = explorer.GenerationSession(llama, text, use_cache=False)
    for _ in range(5):
        reference.step()
    assert reference.attention.self_inputs.kept.key_sequence.store is key_store
    same_views(session, reference)
    same_views(fork, reference)


def test_kept_keys_stay_right_when_the_cache_is_switched_off_and_on_again(llama):
    text = " ".join(["word"] * (BLOCK - 2))
    session = explorer.GenerationSession(llama, text)
    session.step()
    session.set_use_cache(False)  # the cache goes: its blocks stay, holding the kept keys
    session.step()
    session.set_use_cache(True)  # a new cache: the keys go on where they were
    batched_step([session, explorer.GenerationSession(llama, "The")])
    session.step()
    reference = explorer.GenerationSession(llama, text, use_cache=False)
    for _ in range(4):
        reference.step()
    same_views(session, reference)


def same_views(session, reference) -> None:
    """The same tokens, next distribution and heatmaps (``reference`` steps without the cache)."""
    assert session.token_ids == reference.token_ids
    assert float((session.next_logits() - reference.next_logits()).abs().max()) <= 1e-5
    for layer in range(session.config.n_layers):
        np.testing.assert_allclose(session.self_attention(layer), reference.self_attention(layer), atol=1e-5)
