"""One store for many sequences: fixed-size blocks of positions, each sequence a table of its blocks.

A class of students steps one model. If every session kept its keys and values in tensors of its
own, a batched step would have to visit each session's tensors in turn, in every layer: Python
work (and a GIL hand-over) per session. Here every session's positions live in one store per
model, per layer one tensor (slots, heads, head_dim) for each field it keeps (keys, values, or
the queries the heatmaps are computed from). A session owns a list of blocks of ``BLOCK`` slots
(its *block table*, as in vLLM's PagedAttention), so a batch reads all its sessions' keys with one
indexed read per layer (whole blocks: each a contiguous (BLOCK, heads, head_dim) chunk) and
writes their new keys with one indexed write. Slots come first, heads second, so that a block
of every head is one chunk of memory: the batch's read copies whole chunks, 7x faster than a
layout of heads first, whose read gathers one small piece a head (`bench/bench_batch.py`).

The store grows by half when it runs out of free blocks and halves again when three quarters of
it lie unused with the upper half free, so the memory a class took goes back when it leaves.
Blocks are counted: a sequence that begins like another (a copy of a session, a branch) shares
its blocks, and a block is copied only when one of them writes into it (copy on write). A lock
makes every read, write and change of size whole, so that steps running in different threads
never see a store half grown.

    store = PagedStore(n_layers, {"keys": 3, "values": 3}, head_dim=64)
    seq = PagedSequence(store)
    seq.prepare(0, T)
    seq.write(layer, 0, {"keys": keys, "values": values})       # (3, T, 64) each: positions 0 .. T - 1
    seq.read(layer, "keys", T)                                   # (3, T, 64)
"""

from __future__ import annotations

import threading
import weakref

import torch

BLOCK = 16  # positions per block: a session wastes at most 15 slots, a table stays short
HOLE = -1  # a block table's entry for a block given back early (never read)
FIRST_BLOCKS = 64  # the store's first size, in blocks (1,024 positions)


class PagedStore:
    """Per layer and field a (blocks x BLOCK, heads, head_dim) tensor, handed out in blocks."""

    def __init__(
        self,
        n_layers: int,
        fields: dict[str, int],  # name -> heads (keys and values: kv_heads; queries: heads)
        head_dim: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
        padded_reads: bool = True,
    ) -> None:
        """``padded_reads``: a batch reads this store's blocks past a row's length (a cache), so a
        block is zeroed when handed out; a store read only up to each sequence's length need not."""
        self.n_layers, self.fields, self.head_dim = n_layers, dict(fields), head_dim
        self.padded_reads = padded_reads
        self.dtype, self.device = dtype, torch.device(device)
        element = torch.empty((), dtype=dtype).element_size()
        self._position_bytes = sum(self.fields.values()) * head_dim * n_layers * element  # every layer and field
        # Per field, one (slots, heads, hd) tensor a layer: the store grows and shrinks a layer at a
        # time, so the copy in flight is one layer's, not the whole store's (the process's peak memory).
        self.tensors = {name: [self._empty(heads, 0) for _ in range(n_layers)] for name, heads in self.fields.items()}
        self.refs: list[int] = []  # per block: how many sequences hold it (0: free)
        self.free: list[int] = []  # free blocks, the lowest last (taken first: a sequence's blocks stay in order)
        self.lock = threading.Lock()
        # Blocks of sequences that were garbage-collected: handed back here by their finalizers
        # (which may run in any thread, even one holding the lock) and freed at the next allocation.
        self._released: list[list[int]] = []

    def _empty(self, heads: int, blocks: int) -> torch.Tensor:
        # Not an inference tensor (a step's pass runs in inference mode; the store outlives it and
        # is written by passes that are not). Empty, not zeros: the pages of blocks nobody has taken
        # yet stay untouched, so they take no resident memory (a store grown by half holds up to a
        # third of free blocks: ~100 MB with 30 SmolLM2 sessions). ``allocate`` zeroes a block when
        # it hands it out (a batch reads the slots past a row's length, masked with weight 0, and
        # 0 x NaN from never-written memory would be NaN).
        with torch.inference_mode(False):
            return torch.empty((blocks * BLOCK, heads, self.head_dim), dtype=self.dtype, device=self.device)

    def _zero(self, blocks: list[int]) -> None:
        """Zero these blocks in every layer and field (the lock held)."""
        index = torch.tensor(blocks, dtype=torch.long, device=self.device)
        for layers in self.tensors.values():
            for tensor in layers:
                _, heads, head_dim = tensor.shape
                tensor.view(-1, BLOCK, heads, head_dim).index_fill_(0, index, 0)

    @property
    def n_blocks(self) -> int:
        return len(self.refs)

    @property
    def used_blocks(self) -> int:
        with self.lock:
            self._free_released()
            return self.n_blocks - len(self.free)

    @property
    def nbytes(self) -> int:
        """Bytes the store has reserved (used or free)."""
        return sum(t.nbytes for layers in self.tensors.values() for t in layers)

    def bytes_per_position(self) -> int:
        """Bytes one position takes in every layer and field."""
        return self._position_bytes

    # ------------------------------------------------------------------ blocks
    def allocate(self, count: int) -> list[int]:
        """``count`` free blocks, now held once."""
        with self.lock:
            self._free_released()
            if len(self.free) < count:  # grown by half (at least what is asked): a class's memory, little spare
                self._grow(max(count - len(self.free), self.n_blocks // 2, FIRST_BLOCKS))
            taken = [self.free.pop() for _ in range(count)]
            for block in taken:
                self.refs[block] = 1
            if taken and self.padded_reads:
                self._zero(taken)
            return taken

    def share(self, blocks: list[int]) -> None:
        """One more sequence holds these blocks (a copy of a sequence); holes are skipped."""
        with self.lock:
            for block in blocks:
                if block != HOLE:
                    self.refs[block] += 1

    def release(self, blocks: list[int]) -> None:
        """A sequence lets go of these blocks; a block nobody holds is free again."""
        with self.lock:
            self._let_go(blocks)

    def release_later(self, blocks: list[int]) -> None:
        """A finalizer's release: no lock taken here (list.append is atomic)."""
        self._released.append(list(blocks))

    def _free_released(self) -> None:
        while self._released:
            self._let_go(self._released.pop())
        self._shrink_if_idle()

    def _shrink_if_idle(self) -> None:
        """Halve the store (the lock held) when a quarter of it or less is used and its upper half
        is free: the memory a class took goes back when the class leaves."""
        half = self.n_blocks // 2
        idle = self.n_blocks > FIRST_BLOCKS and self.n_blocks - len(self.free) <= self.n_blocks // 4
        if not idle or any(self.refs[half:]):
            return
        for layers in self.tensors.values():
            for layer, tensor in enumerate(layers):
                kept = self._empty(tensor.shape[1], half)
                kept.copy_(tensor[: half * BLOCK])
                layers[layer] = kept
        del self.refs[half:]
        self.free = [block for block in self.free if block < half]

    def _let_go(self, blocks: list[int]) -> None:
        for block in blocks:
            if block == HOLE:  # a block the sequence gave back early (a window's evicted positions)
                continue
            self.refs[block] -= 1
            if self.refs[block] == 0:
                self.free.append(block)
        self.free.sort(reverse=True)

    def is_shared(self, block: int) -> bool:
        return self.refs[block] > 1

    def copy_block(self, source: int, target: int) -> None:
        """Block ``target`` becomes a copy of block ``source`` (every layer and field)."""
        with self.lock:
            src, dst = slice(source * BLOCK, (source + 1) * BLOCK), slice(target * BLOCK, (target + 1) * BLOCK)
            for layers in self.tensors.values():
                for tensor in layers:
                    tensor[dst] = tensor[src]

    def _grow(self, more: int) -> None:
        """``more`` blocks more (the lock held): new tensors, the old slots copied in."""
        old = self.n_blocks
        for layers in self.tensors.values():
            for layer, tensor in enumerate(layers):
                grown = self._empty(tensor.shape[1], old + more)
                grown[: old * BLOCK] = tensor
                layers[layer] = grown  # the old tensor goes now: one layer's copy in flight at a time
        self.refs.extend([0] * more)
        self.free = sorted(self.free + list(range(old, old + more)), reverse=True)

    # ------------------------------------------------------------------ slots
    def write(self, layer: int, slots: torch.Tensor, rows: dict[str, torch.Tensor]) -> None:
        """Write ``rows[name]`` (heads, N, head_dim) into the N ``slots`` of one layer."""
        with self.lock:
            for name, row in rows.items():
                tensor = self.tensors[name][layer]  # (slots, heads, hd)
                if row.untyped_storage().data_ptr() == tensor.untyped_storage().data_ptr():
                    # read from this store (a cache's keys, kept for the heatmaps by an older
                    # sequence): PyTorch refuses to copy a tensor into itself
                    row = row.clone()
                tensor.index_copy_(0, slots, row.transpose(0, 1).to(self.dtype))

    def read(self, layer: int, name: str, slots: torch.Tensor) -> torch.Tensor:
        """(heads, N, head_dim): one layer's ``name`` at the N ``slots`` (a copy, seen heads first)."""
        with self.lock:
            return self.tensors[name][layer][slots].transpose(0, 1)

    def read_range(self, layer: int, name: str, start: int, end: int) -> torch.Tensor:
        """(heads, end - start, head_dim): slots start .. end - 1 (a view of the store)."""
        with self.lock:
            return self.tensors[name][layer][start:end].transpose(0, 1)

    def read_blocks(
        self, layer: int, name: str, tables: torch.Tensor, length: int, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(B, heads, length, head_dim): row b's first ``length`` positions, from the blocks in
        ``tables[b]`` (B, blocks), copied a whole block at a time (a view, heads second in memory).
        ``out``: a (B x blocks, BLOCK, heads, head_dim) tensor to copy them into (a batch reuses one
        for every layer: fresh memory for each read costs its page faults, half the read's time)."""
        batch, count = tables.shape
        with self.lock:
            tensor = self.tensors[name][layer]  # (slots, heads, hd)
            _, heads, head_dim = tensor.shape
            blocks = torch.index_select(tensor.view(-1, BLOCK, heads, head_dim), 0, tables.flatten(), out=out)
        return blocks.view(batch, count * BLOCK, heads, head_dim)[:, :length].transpose(1, 2)


class PagedSequence:
    """One sequence's positions in a store: its blocks in order, and how many positions it holds.

    Position p lives in slot ``blocks[p // BLOCK] * BLOCK + p % BLOCK``. The blocks go back to the
    store when the sequence is garbage (``weakref.finalize``), so a session that ends frees its
    memory for the next one."""

    def __init__(self, store: PagedStore) -> None:
        self.store = store
        self.blocks: list[int] = []  # mutated in place: the finalizer below holds this list
        self.length = 0
        self._table: torch.Tensor | None = None  # (len(blocks) x BLOCK,) slot of each position
        weakref.finalize(self, store.release_later, self.blocks)

    @property
    def capacity(self) -> int:
        return len(self.blocks) * BLOCK

    def prepare(self, start: int, end: int) -> None:
        """Make positions start .. end - 1 writable: blocks enough, none of them shared."""
        needed = -(-end // BLOCK) - len(self.blocks)
        if needed > 0:
            self.blocks.extend(self.store.allocate(needed))
            self._table = None
        for index in range(start // BLOCK, -(-end // BLOCK)):
            self._own(index)

    def _own(self, index: int) -> None:
        """Copy on write: block ``index``, if another sequence holds it too, becomes this one's own copy."""
        block = self.blocks[index]
        if self.store.is_shared(block):
            (own,) = self.store.allocate(1)
            self.store.copy_block(block, own)
            self.store.release([block])
            self.blocks[index] = own
            self._table = None

    def slots(self, start: int, end: int) -> torch.Tensor:
        """(end - start,) the slots of positions start .. end - 1."""
        if self._table is None:
            blocks = torch.tensor(self.blocks, dtype=torch.long, device=self.store.device)
            self._table = (blocks[:, None] * BLOCK + torch.arange(BLOCK, device=blocks.device)).flatten()
        return self._table[start:end]

    def slot(self, position: int) -> int:
        return self.blocks[position // BLOCK] * BLOCK + position % BLOCK

    def contiguous_start(self, end: int) -> int | None:
        """The first slot, if positions 0 .. end - 1 lie in consecutive slots (read as a view)."""
        count = -(-end // BLOCK)
        first = self.blocks[0] if self.blocks else 0
        if self.blocks[:count] == list(range(first, first + count)):
            return first * BLOCK
        return None

    def write(self, layer: int, start: int, rows: dict[str, torch.Tensor]) -> None:
        """Write ``rows[name]`` (heads, n, head_dim) at positions start .. start + n - 1 of one layer
        (``prepare`` first). ``length`` is the caller's to move."""
        n = next(iter(rows.values())).shape[1]
        self.store.write(layer, self.slots(start, start + n), rows)

    def read(self, layer: int, name: str, end: int, start: int = 0) -> torch.Tensor:
        """(heads, end - start, head_dim): positions start .. end - 1 of one layer."""
        first = self.contiguous_start(end)
        if first is not None:
            return self.store.read_range(layer, name, first + start, first + end)
        return self.store.read(layer, name, self.slots(start, end))

    def let_go_before(self, end: int, keep: int = 0) -> None:
        """Give back every block whose positions all lie in keep .. end - 1 (a window's evicted
        positions: no later query reads them); its place in the table becomes a ``HOLE``."""
        for index in range(-(-keep // BLOCK), end // BLOCK):
            block = self.blocks[index]
            if block != HOLE:
                self.store.release([block])
                self.blocks[index] = HOLE
                self._table = None

    def truncate(self, length: int) -> None:
        """Forget every position from ``length`` on (their blocks stay, to be written again)."""
        self.length = min(self.length, length)

    def fork(self) -> PagedSequence:
        """A new sequence holding the same positions, sharing their blocks until one of the two
        writes into a shared block (then that block is copied first)."""
        other = PagedSequence(self.store)
        self.store.share(self.blocks)
        other.blocks.extend(self.blocks)
        other.length = self.length
        return other

    @property
    def nbytes(self) -> int:
        """Bytes of the positions held (arithmetic: no tensor is touched)."""
        return self.length * self.store.bytes_per_position()


_STORES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> {kind: PagedStore}
_STORES_LOCK = threading.Lock()


def store_of(model: torch.nn.Module, kind: str, fields: dict[str, int], n_layers: int, head_dim: int) -> PagedStore:
    """The model's one store of this kind ("cache": keys and values; "record": the queries the
    heatmaps read; "record keys": their keys where no cache holds them), made on first use on the
    model's device and in its dtype."""
    with _STORES_LOCK:
        stores = _STORES.setdefault(model, {})
        if kind not in stores:
            weight = next(model.parameters())
            # Only the cache is read padded (a batch's rows); the heatmaps' records up to each length.
            padded = kind == "cache"
            stores[kind] = PagedStore(n_layers, fields, head_dim, weight.dtype, weight.device, padded_reads=padded)
        return stores[kind]
