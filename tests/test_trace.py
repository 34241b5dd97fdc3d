"""gpualign.trace: spans reach an installed recorder, and nothing is recorded without one."""

import contextlib

import numpy as np

from gpualign import trace
from gpualign.config import AlignConfig
from gpualign.engines import CpuEngine
from gpualign.records import PairBatch
from gpualign.route import run_chain


class Recorder:
    def __init__(self):
        self.spans, self.items = [], []

    @contextlib.contextmanager
    def span(self, name):
        self.spans.append(name)
        yield

    def item(self, name, event, i, item):
        self.items.append((name, event, i))


def test_recorder_receives_spans_and_items():
    @trace.traced_items("numbers")
    def numbers():
        yield from (1, 2)

    rec = Recorder()
    assert trace.install(rec) is None
    try:
        batch = PairBatch.from_sequences([b"ACGT"], [b"ACGA"])
        engine = CpuEngine(1)
        res, _ = run_chain(batch, [engine], AlignConfig(device="cpu", threads=1))
        getattr(engine, "close", lambda: None)()
        assert list(numbers()) == [1, 2]
    finally:
        assert trace.install(None) is rec
    assert np.array_equal(res.score, [1])
    assert "align" in rec.spans
    assert rec.items == [("numbers", "next", 0), ("numbers", "item", 0), ("numbers", "next", 1),
                         ("numbers", "item", 1), ("numbers", "next", 2), ("numbers", "end", 2)]


def test_no_recorder_is_a_plain_call():
    @trace.traced("x")
    def f(a, b=1):
        return a + b

    assert trace.current() is None
    assert f(1, b=2) == 3
    assert trace.kernel("k", len) is len
