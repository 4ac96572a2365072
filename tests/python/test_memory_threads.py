"""No copy on the way to numpy, memory returned, the GIL released, concurrent calls."""

from __future__ import annotations

import gc
import sys
import threading

import numpy as np

from conftest import corpus_texts


def test_result_is_a_view_of_the_buffer_stoke_filled(bert):
    texts = corpus_texts(8)
    arr, owner = bert._model.encode(texts, "pooled", "", 16384, 256, None)
    assert not arr.flags.owndata
    assert arr.__array_interface__["data"][0] == owner.address  # the very buffer, no copy
    assert owner.nbytes == arr.nbytes
    # The public call hands out the same kind of view.
    pub = bert.encode(texts)
    assert not pub.flags.owndata and pub.base is not None
    assert np.array_equal(pub, arr)
    # The array keeps its owner alive: dropping our name for it changes nothing.
    ref = arr.copy()
    del owner
    gc.collect()
    assert np.array_equal(arr, ref)


def test_token_arrays_share_one_buffer(bert):
    tokens, owner = bert._model.encode(corpus_texts(4), "tokens", "", 16384, 256, None)
    start = owner.address
    end = start + owner.nbytes
    for t in tokens:
        a = t.__array_interface__["data"][0]
        assert not t.flags.owndata and start <= a and a + t.nbytes <= end


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_memory_returns_after_1000_encodes(bert):
    texts = corpus_texts(32)
    for _ in range(50):  # warm up: allocator pools, the batcher's workspace
        bert.encode(texts)
    gc.collect()
    before = rss_bytes()
    for _ in range(1000):
        e = bert.encode(texts)
        del e
    gc.collect()
    grown = rss_bytes() - before
    # 1,000 results of 32 x 64 floats are 8 MB: a leak of them would show.
    assert grown < 4 << 20, f"RSS grew {grown / 2**20:.1f} MB over 1,000 encodes"


def test_gil_is_released_during_encode(bert):
    texts = corpus_texts(5000)
    counter = [0]
    stop = threading.Event()
    started = threading.Event()
    during = []

    def count():
        started.set()
        while not stop.is_set():
            counter[0] += 1

    old = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    t = threading.Thread(target=count)
    try:
        t.start()
        started.wait(10)
        c0 = counter[0]
        out = bert.encode(texts)
        during.append(counter[0] - c0)
    finally:
        stop.set()
        t.join(10)
        sys.setswitchinterval(old)
    assert out.shape == (5000, 64)
    # With the GIL held for the whole encode the counter could not move at all.
    assert during[0] > 1000, f"the counter advanced only {during[0]} times during the encode"


def test_eight_threads_encoding_at_once(bert):
    groups = [corpus_texts(40 + 7 * k, offset=300 * k) for k in range(8)]
    want = [bert.encode(g) for g in groups]
    got = [None] * 8
    errors = []
    barrier = threading.Barrier(8)

    def work(k):
        try:
            barrier.wait(30)
            for _ in range(3):
                got[k] = bert.encode(groups[k])
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    for k in range(8):
        # Shared batches change only f32 rounding of the GEMMs.
        assert got[k].shape == want[k].shape
        assert np.allclose(got[k], want[k], atol=1e-6, rtol=0)
