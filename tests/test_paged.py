"""Tests of attnbook.paged (PagedAttention's block tables, simulated).

Expected values are derived by hand from the definitions (Kwon et al., 2023, section 4.2): a
sequence of n tokens holds ceil(n / block_size) blocks; token t sits in block t // block_size
at offset t % block_size; a contiguous scheme reserves max_seq_len slots per request.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnbook import paged


def test_allocate_blocks_core_by_hand():
    # Blocks of 4: a sequence of n tokens holds ceil(n / 4) blocks, the lowest free ids.
    free, table = [1, 3, 4, 7], []
    assert paged.allocate_blocks_core(table, 0, 5, 4, free) == [1, 3]  # 5 tokens: 2
    assert paged.allocate_blocks_core(table, 5, 3, 4, free) == []  # 8 tokens: still 2
    assert paged.allocate_blocks_core(table, 8, 1, 4, free) == [4]  # the 9th: a third
    assert table == [1, 3, 4] and free == [7]
    assert paged.allocate_blocks_core(table, 9, 0, 4, free) == []


def test_block_table_by_hand():
    a = paged.BlockAllocator(num_blocks=8, block_size=4)
    assert a.append("A", 6) == [0, 1]  # 6 tokens -> 2 blocks, lowest ids first
    assert a.append("B", 3) == [2]
    assert a.append("A", 2) == []  # A: 8 tokens, still 2 blocks (exactly full)
    assert a.append("A", 1) == [3]  # the 9th token opens a third block
    assert a.block_table("A") == [0, 1, 3] and a.block_table("B") == [2]
    assert a.slot("A", 0) == (0, 0) and a.slot("A", 5) == (1, 1) and a.slot("A", 8) == (3, 0)
    assert a.slot("B", 2) == (2, 2)
    assert a.used_slots == 12 and a.reserved_slots == 16 and a.num_free == 4
    a.free("B")  # block 2 goes back and is reused first
    assert a.num_free == 5 and a.append("C", 1) == [2]
    assert sorted(a.sequences) == ["A", "C"]
    assert a.length("A") == 9


def test_out_of_blocks_raises_and_allocates_nothing():
    a = paged.BlockAllocator(num_blocks=2, block_size=4)
    a.append(0, 5)
    with pytest.raises(MemoryError, match="needs 1 more blocks"):
        a.append(1, 1)
    assert a.num_free == 0 and a.sequences == [0]


@given(
    lengths=st.lists(st.integers(0, 100), min_size=1, max_size=10), block_size=st.integers(1, 32)
)
def test_waste_is_less_than_one_block_per_sequence(lengths, block_size):
    a = paged.BlockAllocator(
        num_blocks=sum(math.ceil(n / block_size) for n in lengths) + 1, block_size=block_size
    )
    for i, n in enumerate(lengths):
        for _ in range(n):  # one token at a time, as in decoding
            a.append(i, 1)
    assert a.used_slots == sum(lengths)
    assert 0 <= a.reserved_slots - a.used_slots <= len(lengths) * (block_size - 1)
    assert a.reserved_slots == paged.paged_reserved_slots(lengths, block_size)
    # every token has its own slot: no two tokens share (block, offset)
    slots = {a.slot(i, t) for i, n in enumerate(lengths) for t in range(n)}
    assert len(slots) == sum(lengths)


def test_reserved_slot_formulas_by_hand():
    assert paged.paged_reserved_slots([1, 16, 17, 0], 16) == (1 + 1 + 2 + 0) * 16
    assert paged.paged_reserved_slots([], 16) == 0  # no request, no block
    assert paged.contiguous_reserved_slots([], 2048) == 0
    assert paged.contiguous_reserved_slots([1, 16, 17], 2048) == 3 * 2048


def test_simulate_decoding_by_hand():
    # Two requests, block 4, max 16: prompts 3 and 5, outputs 2 and 4.
    tr = paged.simulate_decoding([3, 5], [2, 4], block_size=4, max_seq_len=16)
    # used: step 0: 3 + 5; step 1: 4 + 6; step 2: A done and freed -> 7; 3: 8; 4: B done -> 0
    assert tr.used.tolist() == [8, 10, 7, 8, 0]
    # paged: ceil of each live length over 4, times 4
    assert tr.paged.tolist() == [4 + 8, 4 + 8, 8, 8, 0]
    assert tr.contiguous.tolist() == [32, 32, 16, 16, 0]
    assert tr.step.tolist() == [0, 1, 2, 3, 4]
    assert tr.block_tables == {0: [0], 1: [1, 2]}
    assert (tr.paged >= tr.used).all() and (tr.contiguous >= tr.paged).all()


def test_simulate_decoding_zero_output_request_is_freed_after_step_1():
    tr = paged.simulate_decoding([4, 4], [0, 2], block_size=4, max_seq_len=8)
    assert tr.used.tolist() == [8, 5, 0]


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: paged.BlockAllocator(0, 4), ValueError, "num_blocks"),
        (lambda: paged.BlockAllocator(4, 1.5), TypeError, "block_size"),
        (lambda: paged.BlockAllocator(4, 4).append("x", -1), ValueError, "n_tokens"),
        (lambda: paged.BlockAllocator(4, 4).free("x"), KeyError, "unknown sequence"),
        (lambda: paged.BlockAllocator(4, 4).block_table("x"), KeyError, "unknown sequence"),
        (lambda: paged.contiguous_reserved_slots([3, 9], 8), ValueError, "exceed max_seq_len"),
        (lambda: paged.paged_reserved_slots([[1, 2]], 8), ValueError, "seq_lens"),
        (lambda: paged.paged_reserved_slots([True], 8), TypeError, "seq_lens"),
        (lambda: paged.BlockAllocator(4, 4).append("x", 1.0), TypeError, "n_tokens"),
        (lambda: paged.simulate_decoding([], []), ValueError, "at least one request"),
        (lambda: paged.paged_reserved_slots([1.5], 8), TypeError, "seq_lens"),
        (lambda: paged.simulate_decoding([3], [2, 2]), ValueError, "output_lens"),
        (lambda: paged.simulate_decoding([0], [2]), ValueError, "prompt"),
        (lambda: paged.simulate_decoding([6], [4], max_seq_len=8), ValueError, "max_seq_len"),
        (
            lambda: paged.simulate_decoding([6, 6], [2, 2], block_size=4, num_blocks=3),
            MemoryError,
            "blocks",
        ),
    ],
)
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_slot_out_of_range():
    a = paged.BlockAllocator(4, 4)
    a.append("s", 3)
    with pytest.raises(ValueError, match=r"position must be <= 2, got 3"):
        a.slot("s", 3)
    with pytest.raises(ValueError, match=r"position must be >= 0"):
        a.slot("s", -1)
    with pytest.raises(TypeError, match="position must be an integer"):
        a.slot("s", 1.0)
    assert a.slot("s", np.int64(2)) == (0, 2)
