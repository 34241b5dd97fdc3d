"""The routing/rescue chain, with stand-in engines in front of the real CPU engine."""

import numpy as np

from gpualign.config import AlignConfig
from gpualign.engines import CpuEngine
from gpualign.engines.base import Engine
from gpualign.records import ENGINE_CODE, EXCEEDED, OK, PairBatch
from gpualign.route import run_chain
from oracles import check_results
from strategies import to_batch


class BoundedEngine(Engine):
    """Stands in for a GPU kernel: accepts short pairs, gives up (exceeded) above a score bound."""

    def __init__(self, name, max_len, bound):
        self.name, self.max_len, self.bound = name, max_len, bound
        self.cpu = CpuEngine(1)
        self.seen = []

    def accepts(self, batch: PairBatch, cfg=None):
        return np.maximum(batch.q_len, batch.t_len) <= self.max_len

    def align(self, batch, cfg):
        self.seen.append(batch.index.copy())
        res = self.cpu.align(batch, cfg)
        res.engine[:] = ENGINE_CODE["gpu-edit"]
        over = res.score > self.bound
        res.status[over] = EXCEEDED
        # an exceeded result carries no CIGAR
        res.cigar_len[over] = 0
        keep = np.repeat(~over, np.diff(np.append(res.cigar_off, len(res.cigar))).astype(np.int64)) \
            if len(res.cigar) else np.zeros(0, bool)
        res.cigar = res.cigar[keep]
        res.cigar_off = np.concatenate([[0], np.cumsum(res.cigar_len)[:-1]]).astype(np.int64)
        return res


def _pairs():
    from simulate import simulate

    q, t = simulate(60, 200, 0.05, seed=3)
    q2, t2 = simulate(20, 200, 0.25, seed=4)  # noisy: exceed the small bound
    q3, t3 = simulate(10, 2000, 0.02, seed=5)  # long: not accepted by the short engine
    pairs = list(zip(q + q2 + q3, t + t2 + t3))
    order = np.random.default_rng(0).permutation(len(pairs))
    return [pairs[i] for i in order]


def test_rescue_and_order():
    batch = to_batch(_pairs())
    small = BoundedEngine("gpu-edit-32", max_len=500, bound=20)
    big = BoundedEngine("gpu-edit-64", max_len=500, bound=40)
    cpu = CpuEngine(1)
    cfg = AlignConfig()
    res, counts = run_chain(batch, [small, big, cpu], cfg)
    check_results(batch, res, cfg)  # exact whatever the route
    assert (res.status == OK).all()
    assert counts["gpu-edit-32"] == 80 and counts["cpu-wfa"] >= 10
    assert counts["rescued"] > 0
    # pairs the first engine could not hold went to the second, long ones straight to the CPU
    long_idx = np.nonzero(np.maximum(batch.q_len, batch.t_len) > 500)[0]
    assert not np.isin(long_idx, np.concatenate(small.seen)).any()
    assert (res.engine[long_idx] == ENGINE_CODE["cpu-wfa"]).all()
    assert len(big.seen) == 1 and set(big.seen[0]) <= set(small.seen[0])


def test_nothing_dropped_when_no_engine_can_hold():
    batch = to_batch(_pairs())
    only = BoundedEngine("gpu-edit-32", max_len=10_000, bound=5)
    res, counts = run_chain(batch, [only], AlignConfig())
    assert res.n == batch.n
    failed = res.status != OK
    assert failed.any() and all(i in res.reason for i in np.nonzero(failed)[0])


def test_unaligned_pairs_say_why():
    """A pair no engine accepts is not OK and says why; one every engine that took it exceeded is FAILED
    with that reason; the rest are aligned, each by the first engine that accepts and holds it."""
    from gpualign.records import FAILED

    batch = to_batch(_pairs())
    longest = np.maximum(batch.q_len, batch.t_len)
    small = BoundedEngine("gpu-edit-32", max_len=500, bound=20)
    mid = BoundedEngine("gpu-edit-64", max_len=300, bound=10)  # takes some of small's exceeded, holds none
    res, counts = run_chain(batch, [small, mid], AlignConfig())
    ref, _ = run_chain(batch, [CpuEngine(1)], AlignConfig())
    unplaced = longest > 500
    over = ~unplaced & (ref.score > 20)
    assert unplaced.any() and over.any()
    assert all(res.reason.get(i) == "no engine accepts this pair" for i in np.nonzero(unplaced)[0])
    assert (res.status[unplaced] != OK).all()
    assert (res.status[over] == FAILED).all()
    assert all(res.reason.get(i) == "exceeded the bounds of every engine" for i in np.nonzero(over)[0])
    done = ~unplaced & ~over
    assert (res.status[done] == OK).all() and (res.score[done] == ref.score[done]).all()
    assert set(res.reason) == set(np.nonzero(unplaced | over)[0])
    assert counts["gpu-edit-32"] == int((~unplaced).sum()) and counts["gpu-edit-64"] == int(over.sum())
    assert counts["rescued"] == 2 * int(over.sum())


class OutOfMemoryError(Exception):
    """Stands in for cupy.cuda.memory.OutOfMemoryError (matched by name)."""


def test_out_of_memory_degrades_then_rescues():
    from gpualign.engines import align_degrading

    batch = to_batch(_pairs())
    cpu = CpuEngine(1)
    sizes = []

    def once(b, cfg):  # the "device" holds at most 16 pairs at a time, and never pair 0
        sizes.append(b.n)
        if b.n > 16 or (b.index == batch.index[0]).any():
            raise OutOfMemoryError("out of memory allocating 1234 bytes")
        return cpu.align(b, cfg)

    class Flaky(Engine):
        name = "gpu-edit"

        def accepts(self, b, cfg=None):
            return np.ones(b.n, bool)

        def align(self, b, cfg):
            return align_degrading(once, b, cfg, min_pairs=4)

    cfg = AlignConfig()
    res, counts = run_chain(batch, [Flaky(), cpu], cfg)
    check_results(batch, res, cfg)  # nothing lost, every score exact
    assert counts["rescued"] >= 1 and max(s for s in sizes if s <= 16) <= 16
    # other errors are not swallowed
    import pytest

    with pytest.raises(ValueError):
        align_degrading(lambda b, c: (_ for _ in ()).throw(ValueError("bug")), batch, cfg)


def test_gpu_chain_per_config():
    """Which GPU engines serve which config (constructing them needs no GPU): eWFA then the affine
    engine for edit; the affine engine alone for affine and for ends-free (paf) alignment."""
    from gpualign.config import AlignConfig
    from gpualign.engines import gpu_engines

    names = lambda cfg: [e.name for e in gpu_engines(cfg)]  # noqa: E731
    assert names(AlignConfig()) == ["gpu-edit", "gpu-affine"]
    assert names(AlignConfig(distance_only=True)) == ["gpu-edit", "gpu-affine"]
    assert names(AlignConfig(metric="affine")) == ["gpu-affine"]
    assert names(AlignConfig(ends_free_target=True)) == ["gpu-affine"]
    assert names(AlignConfig(metric="affine", ends_free_target=True)) == ["gpu-affine"]


def test_read_ahead_forwards_errors_and_stops():
    """stages.ReadAhead: batches in order, then the producer's error raised in the consumer; close()
    stops a producer blocked on a full queue."""
    import pytest

    from gpualign.errors import InputError
    from gpualign.stages import ReadAhead

    def gen():
        yield 1
        yield 2
        raise InputError("x.fa: record 3: bad")

    stages = {"read": 0.0}
    got = []
    with pytest.raises(InputError, match="record 3"):
        for item in ReadAhead(gen(), stages):
            got.append(item)
    assert got == [1, 2] and stages["read"] >= 0

    endless = ReadAhead(iter(int, 1), {"read": 0.0})  # 0, 0, 0, ... forever
    assert next(iter(endless)) == 0
    endless.close()
    endless.thread.join(timeout=5)
    assert not endless.thread.is_alive()


def test_write_behind_order_errors_and_abort():
    """stages.WriteBehind: items written in order on its thread; fn's error raised by the next submit()
    or, for the last item, by close(); abort() drops the items still waiting."""
    import threading

    import pytest

    from gpualign.errors import InputError
    from gpualign.stages import WriteBehind

    got, stages = [], {"write": 0.0}
    behind = WriteBehind(got.append, stages, "write")
    for i in range(50):
        behind.submit(i)
    behind.close()
    assert got == list(range(50)) and not behind.thread.is_alive()

    def fail_at(bad):
        def fn(item):
            if item == bad:
                raise InputError("out.tsv: disk full")
            got.append(item)
        return fn

    got.clear()
    behind = WriteBehind(fail_at(3), stages, "write")
    with pytest.raises(InputError, match="disk full"):
        for i in range(100):
            behind.submit(i)
    assert got == [0, 1, 2]
    got.clear()
    behind = WriteBehind(fail_at(2), stages, "write")
    for i in range(3):
        behind.submit(i)
    with pytest.raises(InputError, match="disk full"):
        behind.close()
    assert got == [0, 1]

    got.clear()
    gate = threading.Event()

    def slow(item):
        got.append(item)
        gate.wait(5)

    behind = WriteBehind(slow, stages, "write", ahead=1)
    behind.submit(0)  # being written (waits for the gate)
    behind.submit(1)  # waiting
    behind.abort()
    gate.set()
    behind.thread.join(timeout=5)
    assert not behind.thread.is_alive() and got == [0]


def test_stream_with_concurrent_engine_keeps_order():
    """stages.stream through dispatch.Here with a first engine that aligns `concurrent` batches at once (as
    the affine GPU engine does): the batches align from that many threads at the same time, and are handed on
    in input order, every one, with their own results; the align stage's busy time is the threads'."""
    import threading
    import time

    from gpualign.dispatch import Here
    from gpualign.stages import Summary, dispatcher_summary, stream

    class Slow(BoundedEngine):
        concurrent = 3

        def __init__(self):
            super().__init__("gpu-affine", 10_000, 10**9)
            self.lock, self.now, self.most = threading.Lock(), 0, 0

        def align(self, batch, cfg):
            with self.lock:
                self.now += 1
                self.most = max(self.most, self.now)
            time.sleep(0.05 * (1 + int(batch.index[0]) % 3))  # later batches may finish first
            try:
                return super().align(batch, cfg)
            finally:
                with self.lock:
                    self.now -= 1

    class Sink:
        def __init__(self):
            self.got = []

        def submit(self, batch, res, done):
            self.got.append((batch, res))
            done(batch.n)

        def flush(self):
            pass

    rng = np.random.default_rng(3)
    batches = []
    for b in range(9):
        pairs = [(bytes(rng.choice(list(b"ACGT"), 30)), bytes(rng.choice(list(b"ACGT"), 28))) for _ in range(4)]
        batch = to_batch(pairs)
        batch.index = np.arange(4 * b, 4 * b + 4)
        batches.append(batch)
    eng, sink, summary = Slow(), Sink(), Summary()
    cfg = AlignConfig()
    here = Here([eng], cfg)
    assert here.window == 3
    stream(iter(batches), here, cfg, sink, summary, None)
    dispatcher_summary(here, summary)
    assert [int(b.index[0]) for b, _ in sink.got] == [4 * b for b in range(9)]
    assert 2 <= eng.most <= 3 and summary.pairs == summary.written == 36
    assert summary.stage_seconds["align"] >= 9 * 0.05 and summary.extra == []
    for batch, res in sink.got:
        check_results(batch, res, cfg)


def test_stream_writes_an_aligned_batch_while_the_next_is_read():
    """stages.stream with a reader slower than the engine: each batch is handed to the writer once it is
    aligned and the next one read, not once the dispatcher's window is full (then every write came after
    the reading: the run's end waited for all but the first batches' writing)."""
    import time

    from gpualign.dispatch import Here
    from gpualign.stages import Summary, stream

    events = []

    class Sink:
        def submit(self, batch, res, done):
            events.append(("write", int(batch.index[0]) // 4))
            done(batch.n)

        def flush(self):
            pass

    rng = np.random.default_rng(4)

    def slow_reader():
        for b in range(6):
            time.sleep(0.25)  # (the margin the check below has: a batch aligns in milliseconds)
            batch = to_batch([(bytes(rng.choice(list(b"ACGT"), 30)), bytes(rng.choice(list(b"ACGT"), 28)))
                              for _ in range(4)])
            batch.index = np.arange(4 * b, 4 * b + 4)
            events.append(("read", b))
            yield batch

    cfg = AlignConfig()
    eng = BoundedEngine("gpu-affine", 10_000, 10**9)
    eng.concurrent = 3
    here = Here([eng], cfg)
    assert here.window == 3
    stream(slow_reader(), here, cfg, Sink(), Summary(), None)
    at = {e: i for i, e in enumerate(events)}
    assert [b for kind, b in events if kind == "write"] == list(range(6))
    assert all(at["write", b] < at["read", b + 2] for b in range(4))


def test_stream_sends_a_batch_read_already_before_writing():
    """stages.stream with the next batch read already when the oldest is aligned: the next goes to the engines
    first, then the oldest is written (written first, it would leave the engines a batch short meanwhile);
    with the reader behind, the previous test's order holds."""
    import time
    from concurrent.futures import Future

    from gpualign.records import AlignBatch
    from gpualign.stages import ReadAhead, Summary, stream

    events = []

    class Sink:
        def submit(self, batch, res, done):
            events.append(("write", int(batch.index[0])))
            done(batch.n)

        def flush(self):
            pass

    class Done:  # a dispatcher whose batches are aligned at once
        window = 3

        def submit(self, batch):
            events.append(("submit", int(batch.index[0])))
            fut = Future()
            fut.set_result((AlignBatch.empty(batch.n, True), {}))
            return fut

        def settle(self):
            pass

    batches = []
    for b in range(5):
        batch = to_batch([(b"ACGT", b"ACGA")])
        batch.index = np.array([b])
        batches.append(batch)
    summary = Summary()
    ahead = ReadAhead(iter(batches), summary.stage_seconds)
    while not ahead.q.full():  # two batches read and waiting
        time.sleep(0.01)
    stream(ahead, Done(), AlignConfig(), Sink(), summary, None)
    assert [b for kind, b in events if kind == "write"] == list(range(5))
    assert events.index(("submit", 1)) < events.index(("write", 0))


def test_ewfa_start_level_holds_most_of_the_sample():
    """eWFA's first level: the smallest that holds the sample's 80% quantile (np.quantile "higher"),
    exceeding scores (-1) counting as beyond every level."""
    from gpualign.engines.gpu_edit import CIGAR_LEVELS, start_level

    rng = np.random.default_rng(5)
    assert start_level(CIGAR_LEVELS, np.zeros(0, np.int32)) == 32
    for _ in range(500):
        s = rng.integers(-1, 160, int(rng.integers(1, 1100))).astype(np.int32)
        q = np.quantile(np.where(s < 0, np.iinfo(np.int32).max, s), 0.8, method="higher")
        want = next((e for e in CIGAR_LEVELS if q <= e), CIGAR_LEVELS[-1])
        assert start_level(CIGAR_LEVELS, s) == want


def test_ewfa_next_level_holds_most_of_the_batch():
    """The next batch's first level: the smallest from this batch's first at which 80% of its pairs were done,
    pairs beyond every level counting as never done (start_level's rule on a batch's outcome)."""
    from gpualign.engines.gpu_edit import CIGAR_LEVELS, next_level

    rng = np.random.default_rng(6)
    assert next_level(CIGAR_LEVELS, 32, {32: 80, 64: 20}, 100) == 32
    assert next_level(CIGAR_LEVELS, 32, {32: 79, 64: 21}, 100) == 64
    assert next_level(CIGAR_LEVELS, 64, {64: 100}, 100) == 64  # (whether 32 would do: a sample's to say)
    assert next_level(CIGAR_LEVELS, 32, {32: 70}, 100) == 128  # 30 beyond every level
    for _ in range(300):
        first = CIGAR_LEVELS[int(rng.integers(0, 3))]
        up = CIGAR_LEVELS[CIGAR_LEVELS.index(first):]
        done = {e: int(rng.integers(0, 50)) for e in up}
        n = sum(done.values()) + int(rng.integers(0, 50))
        if n == 0:
            continue
        scores = np.concatenate([np.full(v, e, np.int32) for e, v in done.items()] +
                                [np.full(n - sum(done.values()), -1, np.int32)])
        want = max(first, next((e for e in up if 5 * (scores[(scores >= 0) & (scores <= e)].size) >= 4 * n),
                               CIGAR_LEVELS[-1]))
        assert next_level(CIGAR_LEVELS, first, done, n) == want


def test_device_batches_split_to_the_buffer_bound(monkeypatch):
    """align_split: a batch whose sequence buffer exceeds MAX_BATCH_BASES reaches the device in parts
    under the bound, and the results come back in pair order."""
    from gpualign.engines import _device
    from gpualign.records import AlignBatch

    monkeypatch.setattr(_device, "MAX_BATCH_BASES", 1000)
    rng = np.random.default_rng(2)
    q = [bytes(rng.choice(list(b"ACGT"), int(rng.integers(1, 60)))) for _ in range(200)]
    batch = PairBatch.from_sequences(q, q)
    seen = []

    def fake_device(b, cfg):
        assert b.n == 1 or len(b.seq) <= 1000
        seen.append(b.n)
        res = AlignBatch.empty(b.n, False)
        res.score[:] = b.q_len
        res.status[:] = OK
        return res

    res = _device.align_split(fake_device, batch, AlignConfig(distance_only=True))
    assert len(seen) > 1 and sum(seen) == batch.n
    assert (res.score == batch.q_len).all() and (res.status == OK).all()


def test_ewfa_accepts_from_the_length_bounds():
    """eWFA takes a whole batch when its length bounds allow it, else decides pair by pair; the bounds are
    the batch's own (empty batch: zeros)."""
    from gpualign.engines.gpu_edit import GpuEditEngine

    engine, cfg = GpuEditEngine(), AlignConfig()
    near = PairBatch.from_sequences([b"A" * 100, b"C" * 150], [b"A" * 90, b"C" * 200])
    assert near.length_bounds() == (100, 150, 90, 200)
    assert engine.accepts(near, cfg).all()
    far = PairBatch.from_sequences([b"A" * 100, b"C" * 150, b"G"], [b"A" * 90, b"C" * 300, b"G" * 130])
    assert engine.accepts(far, cfg).tolist() == [True, False, False]  # |150 - 300| and |1 - 130| exceed E128
    assert not engine.accepts(near, AlignConfig(metric="affine")).any()
    assert PairBatch.from_sequences([], []).length_bounds() == (0, 0, 0, 0)


def test_take_a_run_and_scattered_pairs():
    """PairBatch.take (the rescue's subsets, the CPU engines' chunks): a run of pairs (views joined) and a
    scattered or reordered set (gathered) give each pair's own bytes, in a buffer of their own."""
    rng = np.random.default_rng(5)
    qs = [bytes(rng.choice(list(b"ACGT"), int(rng.integers(0, 9)))) for _ in range(12)]
    ts = [bytes(rng.choice(list(b"ACGT"), int(rng.integers(0, 9)))) for _ in range(12)]
    batch = PairBatch.from_sequences(qs, ts)
    for idx in (np.arange(3, 9), np.array([7, 2, 2, 10]), np.arange(0), np.arange(12)):
        sub = batch.take(idx)
        assert [sub.query(i) for i in range(sub.n)] == [qs[i] for i in idx]
        assert [sub.target(i) for i in range(sub.n)] == [ts[i] for i in idx]
        assert sub.seq.size == sum(len(qs[i]) + len(ts[i]) for i in idx)
        assert not np.shares_memory(sub.seq, batch.seq)


def test_failure_note_names_the_pair_by_its_input_number():
    """stages.failure_note: the failed row's number in the input (from 1), its query name where the batch has
    names, and the engine's reason ('failed' where it gave none)."""
    from gpualign.records import FAILED, AlignBatch, PairBatch
    from gpualign.stages import failure_note

    def res(n, reason):
        r = AlignBatch(np.zeros(n, np.int32), np.full(n, FAILED, np.uint8), np.zeros(n, np.uint8),
                       np.zeros(0, np.uint32), np.zeros(n, np.int64), np.zeros(n, np.int64))
        r.reason.update(reason)
        return r

    named = PairBatch.from_sequences([b"AC", b"GT"], [b"AC", b"GA"], index_start=10, q_names=["a", "b"])
    assert failure_note(named, res(2, {1: "too long"}), 1) == "pair 12 (b): too long"
    nameless = PairBatch.from_sequences([b"AC"], [b"AG"], index_start=4)
    assert failure_note(nameless, res(1, {}), 0) == "pair 5: failed"
