"""PagedAttention's memory manager, simulated: KV caches stored in fixed-size blocks.

A serving system that keeps each request's KV cache in one contiguous buffer must reserve, when
the request starts, room for the longest sequence it might reach (``max_seq_len`` tokens): it
does not know how many tokens the request will generate. Most of that reservation is never
used. PagedAttention (Kwon et al., 2023) stores the cache in *blocks* of ``block_size`` tokens,
allocated one at a time as the sequence grows, anywhere in a pool of physical blocks; a per
request **block table** maps logical block ``i`` (tokens ``i * block_size ..``) to its
physical block. The only waste is the unfilled tail of each request's last block.

This module simulates the bookkeeping only — which physical block holds which tokens — in
units of *token slots* (one slot holds one token's keys and values for every layer and KV
head; multiply by ``kv_cache_bytes(config, 1)`` for bytes). No tensor is allocated.

* :class:`BlockAllocator`: the pool of physical blocks, the free list and the block tables.
* :func:`contiguous_reserved_slots`, :func:`paged_reserved_slots`: the slots reserved for a set
  of sequence lengths under each scheme.
* :func:`simulate_decoding`: a batch of requests decoded together, step by step, through a
  :class:`BlockAllocator`; the slots used and reserved under both schemes at every step.

Source: Kwon et al., "Efficient Memory Management for Large Language Model Serving with
PagedAttention" (SOSP 2023), sections 3 and 4.1-4.2 (block tables, figure 6; internal
fragmentation bounded by one block per request).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .checks import check_int, check_int_array

__all__ = [
    "allocate_blocks_core",
    "BlockAllocator",
    "contiguous_reserved_slots",
    "paged_reserved_slots",
    "DecodingTrace",
    "simulate_decoding",
]


# fmt: off
def allocate_blocks_core(table, length, n_tokens, block_size, free):
    """Grow a sequence's block table by the blocks that n_tokens more need.

    table: physical block ids in token order (token t sits in slot
    t % block_size of block table[t // block_size]); free: the free list.
    Returns the newly allocated block ids; the pool must hold enough.
    """
    blocks = -(-(length + n_tokens) // block_size)  # ceil: blocks to hold all
    new = [free.pop(0) for _ in range(blocks - len(table))]  # lowest ids first
    table.extend(new)
    return new
# fmt: on


class BlockAllocator:
    """A pool of ``num_blocks`` physical KV-cache blocks of ``block_size`` token slots each.

    Each sequence (request) owns a block table: the list of physical block ids holding its
    tokens in order, token ``t`` in slot ``t % block_size`` of block ``table[t // block_size]``.
    :meth:`append` adds tokens and takes a new block from the free list only when the last block
    is full (:func:`allocate_blocks_core`); :meth:`free` returns all of a sequence's blocks.
    Blocks are handed out lowest id first, so a freed block is reused by the next sequence
    that needs one.

    Args:
        num_blocks: physical blocks in the pool, >= 1.
        block_size: token slots per block, >= 1 (vLLM's default is 16).

    Raises:
        TypeError: if an argument is not an integer.
        ValueError: if an argument is < 1.

    Source: Kwon et al. (2023), section 4.2 and figure 6.
    """

    def __init__(self, num_blocks: int, block_size: int):
        self.num_blocks = check_int(num_blocks, "num_blocks", 1)
        self.block_size = check_int(block_size, "block_size", 1)
        self._free = list(range(self.num_blocks))  # ascending: pop(0) gives the lowest id
        self._tables: dict = {}
        self._lengths: dict = {}

    def append(self, seq_id, n_tokens: int = 1) -> list:
        """Add ``n_tokens`` tokens to sequence ``seq_id`` (created on first use).

        Checks that the pool has the blocks, then calls :func:`allocate_blocks_core`.

        Args:
            seq_id: any hashable name of the sequence.
            n_tokens: tokens to add, >= 0 (the whole prompt at prefill, 1 per decoding step).

        Returns:
            The physical block ids newly allocated for this call (possibly empty).

        Raises:
            TypeError: if ``n_tokens`` is not an integer.
            ValueError: if ``n_tokens < 0``.
            MemoryError: if the pool has too few free blocks; nothing is allocated then.
        """
        n_tokens = check_int(n_tokens, "n_tokens", 0)
        table = self._tables.get(seq_id, [])
        length = self._lengths.get(seq_id, 0)
        need = -(-(length + n_tokens) // self.block_size) - len(table)
        if need > len(self._free):
            raise MemoryError(
                f"sequence {seq_id!r} needs {need} more blocks of {self.block_size} slots for "
                f"{n_tokens} new tokens, but only {len(self._free)} of {self.num_blocks} are free"
            )
        table = list(table)  # a copy: nothing changes if the core fails
        new = allocate_blocks_core(table, length, n_tokens, self.block_size, self._free)
        self._tables[seq_id] = table
        self._lengths[seq_id] = length + n_tokens
        return new

    def free(self, seq_id) -> None:
        """Return every block of ``seq_id`` to the free list and forget the sequence.

        Args:
            seq_id: a sequence that :meth:`append` created.

        Raises:
            KeyError: if ``seq_id`` is unknown.
        """
        if seq_id not in self._tables:
            raise KeyError(f"unknown sequence {seq_id!r}; known: {sorted(map(str, self._tables))}")
        self._free.extend(self._tables.pop(seq_id))
        self._free.sort()
        del self._lengths[seq_id]

    def block_table(self, seq_id) -> list:
        """The physical block ids of ``seq_id``, in token order (a copy).

        Args:
            seq_id: a known sequence.

        Returns:
            A list of ``ceil(length / block_size)`` block ids.

        Raises:
            KeyError: if ``seq_id`` is unknown.
        """
        if seq_id not in self._tables:
            raise KeyError(f"unknown sequence {seq_id!r}")
        return list(self._tables[seq_id])

    def slot(self, seq_id, position: int) -> tuple:
        """Where token ``position`` of ``seq_id`` is stored: ``(physical block, offset)``.

        Args:
            seq_id: a known sequence.
            position: token index, ``0 <= position < length``.

        Returns:
            ``(block_id, offset)`` with ``0 <= offset < block_size``.

        Raises:
            KeyError: if ``seq_id`` is unknown.
            TypeError: if ``position`` is not an integer.
            ValueError: if ``position`` is outside the sequence.
        """
        if seq_id not in self._tables:
            raise KeyError(f"unknown sequence {seq_id!r}")
        position = check_int(position, "position", 0, self._lengths[seq_id] - 1)
        return self._tables[seq_id][position // self.block_size], position % self.block_size

    def length(self, seq_id) -> int:
        """Tokens stored for ``seq_id``.

        Args:
            seq_id: a known sequence.

        Returns:
            The number of tokens appended so far.

        Raises:
            KeyError: if ``seq_id`` is unknown.
        """
        if seq_id not in self._lengths:
            raise KeyError(f"unknown sequence {seq_id!r}")
        return self._lengths[seq_id]

    @property
    def sequences(self) -> list:
        """The ids of the sequences currently holding blocks."""
        return list(self._tables)

    @property
    def num_free(self) -> int:
        """Physical blocks on the free list."""
        return len(self._free)

    @property
    def used_slots(self) -> int:
        """Token slots holding a token, over all sequences."""
        return int(sum(self._lengths.values()))

    @property
    def reserved_slots(self) -> int:
        """Token slots in allocated blocks (``blocks in use * block_size``)."""
        return (self.num_blocks - len(self._free)) * self.block_size


def contiguous_reserved_slots(seq_lens, max_seq_len: int) -> int:
    """Slots reserved when every sequence gets one contiguous buffer of ``max_seq_len`` tokens.

    Args:
        seq_lens: 1-D integers, the tokens each sequence holds (each ``<= max_seq_len``).
        max_seq_len: tokens reserved per sequence (the longest it may reach).

    Returns:
        ``len(seq_lens) * max_seq_len``, an ``int``.

    Raises:
        TypeError: for non-integer lengths.
        ValueError: if ``seq_lens`` is not 1-D, a length is negative or exceeds
            ``max_seq_len``, or ``max_seq_len < 1``.
    """
    lens = check_int_array(seq_lens, "seq_lens", 0, ndim=1)
    max_seq_len = check_int(max_seq_len, "max_seq_len", 1)
    if (lens > max_seq_len).any():
        raise ValueError(f"seq_lens {lens.tolist()} exceed max_seq_len={max_seq_len}")
    return int(lens.size * max_seq_len)


def paged_reserved_slots(seq_lens, block_size: int) -> int:
    """Slots reserved when every sequence holds ``ceil(length / block_size)`` blocks.

    Args:
        seq_lens: 1-D integers, the tokens each sequence holds.
        block_size: token slots per block, >= 1.

    Returns:
        ``sum(ceil(len / block_size)) * block_size``, an ``int``: at most ``block_size - 1``
        unused slots per sequence.

    Raises:
        TypeError: for non-integer lengths or block size.
        ValueError: if ``seq_lens`` is not 1-D, a length is negative, or ``block_size < 1``.
    """
    lens = check_int_array(seq_lens, "seq_lens", 0, ndim=1)
    block_size = check_int(block_size, "block_size", 1)
    return int(((lens + block_size - 1) // block_size).sum() * block_size)


@dataclass(frozen=True)
class DecodingTrace:
    """Memory of a batch of requests decoded together, after each step (in token slots).

    Attributes:
        step: ``(T + 1,)`` step index; step 0 is after the prefill of every prompt.
        used: ``(T + 1,)`` slots holding a token (the sum of the live sequences' lengths).
        paged: ``(T + 1,)`` slots in allocated blocks (:attr:`BlockAllocator.reserved_slots`).
        contiguous: ``(T + 1,)`` slots reserved by ``max_seq_len`` buffers of the live requests.
        block_size: slots per block.
        max_seq_len: slots per contiguous buffer.
        block_tables: the block table of every request at step 0 (after prefill), by index.
    """

    step: np.ndarray
    used: np.ndarray
    paged: np.ndarray
    contiguous: np.ndarray
    block_size: int
    max_seq_len: int
    block_tables: dict


def simulate_decoding(
    prompt_lens,
    output_lens,
    *,
    block_size: int = 16,
    max_seq_len: int = 2048,
    num_blocks: int | None = None,
) -> DecodingTrace:
    """Decode a batch of requests one token per step through a :class:`BlockAllocator`.

    Request ``r`` first stores its prompt (``prompt_lens[r]`` tokens), then one token per step
    for ``output_lens[r]`` steps, and frees its blocks after its last token. At every step the
    trace records the slots in use, the slots in allocated blocks, and the slots a contiguous
    scheme would reserve (``max_seq_len`` per live request).

    Args:
        prompt_lens: 1-D integers, prompt tokens per request, >= 1.
        output_lens: 1-D integers of the same length, generated tokens per request.
        block_size: slots per block.
        max_seq_len: the longest sequence a request may reach (the contiguous reservation);
            every ``prompt + output`` must fit.
        num_blocks: pool size; ``None`` means enough for every request at full length.

    Returns:
        :class:`DecodingTrace` with ``max(output_lens) + 1`` steps.

    Raises:
        TypeError: for non-integer arguments.
        ValueError: if the length lists are empty or differ in shape, a prompt is empty, or a
            request would exceed ``max_seq_len``.
        MemoryError: if ``num_blocks`` is too small for the batch.

    Source: Kwon et al. (2023), sections 3 and 4.
    """
    prompts = check_int_array(prompt_lens, "prompt_lens", 0, ndim=1)
    outputs = check_int_array(output_lens, "output_lens", 0, ndim=1)
    if prompts.size == 0:
        raise ValueError("prompt_lens must hold at least one request, got none")
    if prompts.shape != outputs.shape:
        raise ValueError(
            f"prompt_lens has shape {prompts.shape} but output_lens has {outputs.shape}"
        )
    if (prompts < 1).any():
        raise ValueError(f"every prompt needs >= 1 token, got prompt_lens={prompts.tolist()}")
    block_size = check_int(block_size, "block_size", 1)
    max_seq_len = check_int(max_seq_len, "max_seq_len", 1)
    total = prompts + outputs
    if (total > max_seq_len).any():
        raise ValueError(
            f"prompt + output lengths {total.tolist()} exceed max_seq_len={max_seq_len}"
        )
    if num_blocks is None:
        num_blocks = int(((total + block_size - 1) // block_size).sum())
    alloc = BlockAllocator(num_blocks, block_size)
    for r, p in enumerate(prompts):
        alloc.append(r, int(p))
    tables = {r: alloc.block_table(r) for r in range(prompts.size)}
    n_steps = int(outputs.max())
    used, paged, contiguous = [], [], []

    def record():
        used.append(alloc.used_slots)
        paged.append(alloc.reserved_slots)
        contiguous.append(len(alloc.sequences) * max_seq_len)

    record()
    for t in range(1, n_steps + 1):
        for r in range(prompts.size):
            if t <= outputs[r]:
                alloc.append(r, 1)
        for r in range(prompts.size):
            if t == max(int(outputs[r]), 1):  # the request is done: its blocks go back
                alloc.free(r)
        record()
    return DecodingTrace(
        step=np.arange(n_steps + 1),
        used=np.array(used),
        paged=np.array(paged),
        contiguous=np.array(contiguous),
        block_size=block_size,
        max_seq_len=max_seq_len,
        block_tables=tables,
    )
