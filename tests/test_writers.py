"""The bulk-built PAF and TSV writers against a line-by-line Python rendering of the same results
(failed pairs, empty sequences, non-ASCII names, distance-only, both metrics)."""

import dataclasses
import io
from pathlib import Path

import numpy as np
import pytest

from gpualign import cigar as C
from gpualign import interrupt
from gpualign.config import AlignConfig
from gpualign.engines.cpu_wfa import CpuWfaEngine
from gpualign.errors import InputError
from gpualign.output.paf import PafWriter
from gpualign.output.tsv import TsvWriter
from gpualign.records import EXCEEDED, FAILED, OK, STATUS_NAMES, PairBatch


def _batch():
    rng = np.random.default_rng(5)
    qs = [bytes(rng.choice(list(b"ACGT"), int(k))) for k in rng.integers(0, 60, 300)]
    ts = [bytes(b"".join([q[: len(q) // 2], b"T", q[len(q) // 2 + 1:]])) if q else b"" for q in qs]
    qs[:3], ts[:3] = [b"", b"ACGT", b""], [b"ACG", b"", b""]
    names = [f"q{i}" if i % 7 else f"é{i}|x" for i in range(len(qs))]
    return PairBatch.from_sequences(qs, ts, q_names=names, t_names=[f"t{i}" for i in range(len(qs))])


def _expected(batch, res, fmt, metric):
    text = C.to_text(res.cigar, res.cigar_off, res.cigar_len) if res.has_cigar else [""] * res.n
    lines = []
    for i in range(batch.n):
        ok = res.status[i] == OK
        ops = res.cigar[res.cigar_off[i]: res.cigar_off[i] + res.cigar_len[i]]
        ln = (ops >> 4).astype(int)
        matches = int(ln[(ops & 15) == C.EQ].sum())
        nm = int(ln[np.isin(ops & 15, (C.X, C.I, C.D))].sum())
        q, t, s = int(batch.q_len[i]), int(batch.t_len[i]), int(res.score[i])
        if fmt == "paf":
            if ok:
                lines.append(f"{batch.q_names[i]}\t{q}\t0\t{q}\t+\t{batch.t_names[i]}\t{t}\t0\t{t}\t{matches}\t"
                             f"{matches + nm}\t255\tNM:i:{nm}\tAS:i:{-s}" + (f"\tcg:Z:{text[i]}" if text[i] else "")
                             + "\n")  # (no cg:Z for an empty CIGAR: a tag needs a value)
            continue
        if not ok:
            score = dist = cig = "*"
        elif res.has_cigar:
            score, dist, cig = s, nm, text[i] or "*"
        else:
            score, dist, cig = s, (s if metric == "edit" else "*"), "*"
        lines.append(f"{batch.q_names[i]}\t{batch.t_names[i]}\t{q}\t{t}\t{score}\t{dist}\t{cig}\t"
                     f"{STATUS_NAMES[res.status[i]]}\n")
    return "".join(lines).encode()


@pytest.mark.parametrize("metric", ["edit", "affine"])
@pytest.mark.parametrize("distance_only", [False, True])
def test_writers_equal_line_by_line(metric, distance_only):
    batch = _batch()
    res = CpuWfaEngine(1).align(batch, AlignConfig(device="cpu", metric=metric, distance_only=distance_only))
    res.status[10::37] = FAILED
    res.status[11::41] = EXCEEDED
    for fmt, writer in (("paf", PafWriter), ("tsv", TsvWriter)):
        out = io.BytesIO()
        w = writer(out, metric=metric)
        start = len(out.getvalue())
        w.write(batch, res)
        assert out.getvalue()[start:] == _expected(batch, res, fmt, metric), fmt


@pytest.mark.parametrize("fmt", ["paf", "tsv", "sam", "bam"])
def test_formatting_in_worker_processes_same_output(tmp_path, fmt, monkeypatch):
    """-t 8 formats text in 2 worker processes, written in input order: same bytes as formatting in the
    parent (-t 1), over many small batches; the summary counts every line."""
    from gpualign.config import AlignConfig
    from gpualign.output import parallel
    from gpualign.pipeline import run_pairs

    pools = []
    start = parallel.start_pool
    monkeypatch.setattr(parallel, "start_pool", lambda t: pools.append(start(t)) or pools[-1])

    rng = np.random.default_rng(2)
    qs = ["".join(rng.choice(list("ACGT"), int(k))) for k in rng.integers(0, 60, 300)]
    ts = [q[: len(q) // 2] + "".join(rng.choice(list("ACGT"), 3)) + q[len(q) // 2:] for q in qs]
    a, b = tmp_path / "a.fa", tmp_path / "b.fa"
    a.write_text("".join(f">q{i}\n{s}\n" for i, s in enumerate(qs)))
    b.write_text("".join(f">t{i}\n{s}\n" for i, s in enumerate(ts)))
    out = {}
    for threads in (1, 8):
        cfg = AlignConfig(device="cpu", threads=threads, batch_pairs=7)
        path = tmp_path / f"o{threads}.{fmt}"
        summary = run_pairs(str(a), str(b), str(path), None, cfg, "test")
        if fmt == "bam":  # compressed: compared as the SAM text htslib reads back
            import pysam

            with pysam.AlignmentFile(str(path), "rb") as fh:
                out[threads] = (str(fh.header) + "".join(r.to_string() + "\n" for r in fh)).encode()
        else:
            out[threads] = path.read_bytes()
        assert summary.written == len(qs)
    body = [ln for ln in out[1].splitlines() if not ln.startswith(b"@")]  # SAM: header lines apart
    assert out[1] == out[8] and len(body) == len(qs) + (fmt == "tsv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.fa", "b.fa", f"o1.{fmt}", f"o8.{fmt}"]  # no spool
    assert pools[0] is None and pools[1]._max_workers == 4  # -t 1 in the parent, -t 8 in 4 workers


def _expected_sam(batch, res, metric):
    """SAM lines one by one, as the writer did before it built them in bulk."""
    from gpualign.output.sam import SEQ_TABLE, clean_reason

    text = C.to_text(res.cigar, res.cigar_off, res.cigar_len) if res.has_cigar else [""] * res.n
    out = []
    for i in range(batch.n):
        s = batch.query(i).translate(SEQ_TABLE).decode() or "*"
        q = batch.q_quals[i] if batch.q_quals and batch.q_quals[i] else "*"
        ok = res.status[i] == OK
        if not ok or batch.t_len[i] == 0:
            why = "empty_target" if ok else clean_reason(res.reason.get(i, "failed"))
            out.append(f"{batch.q_names[i]}\t4\t*\t0\t0\t*\t*\t0\t0\t{s}\t{q}\tzr:Z:{why}\n")
            continue
        ops = res.cigar[res.cigar_off[i]: res.cigar_off[i] + res.cigar_len[i]]
        nm = int((ops >> 4)[np.isin(ops & 15, (C.X, C.I, C.D))].sum())
        if res.has_cigar:
            cig, tag, flag, mapq = text[i], f"\tNM:i:{nm}", 0, 255
        else:  # no CIGAR: unmapped, placed on its target
            cig, tag, flag, mapq = "*", (f"\tNM:i:{res.score[i]}" if metric == "edit" else ""), 4, 0
        out.append(f"{batch.q_names[i]}\t{flag}\t{batch.t_names[i]}\t1\t{mapq}\t{cig}\t*\t0\t0\t{s}\t{q}{tag}"
                   f"\tAS:i:{-res.score[i]}\n")
    return "".join(out).encode()


@pytest.mark.parametrize("metric", ["edit", "affine"])
@pytest.mark.parametrize("distance_only", [False, True])
@pytest.mark.parametrize("fastq", [False, True])
def test_sam_lines_equal_line_by_line(metric, distance_only, fastq):
    """SAM built in bulk == one line at a time: unmapped pairs (failed, exceeded with a reason holding a
    tab, empty target), empty queries, IUPAC in SEQ, FASTQ qualities (some empty) or none."""
    from gpualign.output.sam import SamWriter

    batch = _batch()
    batch.q_names = [n.replace("é", "e") for n in batch.q_names]  # (SAM's names are printable ASCII)
    batch.seq = batch.seq.copy()
    batch.seq[5] = ord("R")  # an IUPAC code in a query: SEQ writes it as-is (letters are allowed)
    batch.seq[int(batch.q_off[4])] = ord("*") if batch.q_len[4] else batch.seq[5]
    if fastq:
        batch.q_quals = ["I" * int(n) if i % 5 else "" for i, n in enumerate(batch.q_len.tolist())]
    res = CpuWfaEngine(1).align(batch, AlignConfig(device="cpu", metric=metric, distance_only=distance_only))
    res.status[10::37] = FAILED
    res.status[11::41] = EXCEEDED
    res.reason[10] = "no\tengine é"
    out = io.BytesIO()
    SamWriter(out, targets={}, command_line="x", metric=metric).write(batch, res)
    body = out.getvalue().split(b"\n", 2)[2]  # after @HD and @PG
    assert body == _expected_sam(batch, res, metric)


def test_bam_spool_removed_when_the_run_fails(tmp_path):
    """BAM goes through a temporary SAM file: a failed run leaves neither it nor a partial BAM."""
    from gpualign.config import AlignConfig
    from gpualign.errors import InputError
    from gpualign.pipeline import run_pairs

    a, b = tmp_path / "a.fa", tmp_path / "b.fa"
    a.write_text("".join(f">q{i}\nACGTACGT\n" for i in range(50)))
    b.write_text("".join(f">t{i}\nACGTACGT\n" for i in range(30)) + ">t30\nAC GT\n")
    with pytest.raises(InputError, match="record 31"):
        run_pairs(str(a), str(b), str(tmp_path / "o.bam"), None, AlignConfig(device="cpu", threads=1,
                                                                              batch_pairs=7), "test")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.fa", "b.fa"]


class _BigLines:
    """A stand-in formatter: render gives `size` bytes of one line per batch (pickled by reference into
    the formatting processes). Its batches are plain numbers, sent whole (needs_seq)."""

    needs_seq = True

    def __init__(self, size: int):
        self.size = size

    def render(self, batch, res):
        return bytes([65 + batch % 26]) * self.size, 1


def _new_blocks(before: set) -> set:
    """This process's run's blocks made since `before` (another run's, on the same machine, left out)."""
    import os

    ours = interrupt.shm_name().rsplit("_", 1)[0] + "_"
    return {x for x in set(os.listdir("/dev/shm")) - before if x.startswith(ours)}


class _NoStream:
    """A writer whose stream cannot be had (SAM's, when the target scan it waits for failed)."""

    fmt = _BigLines(1 << 20)

    @property
    def stream(self):
        raise InputError("t.fa: target name 'a' appears twice with different lengths")


@pytest.mark.parametrize("fail", [False, True, "stream"], ids=["written", "discarded", "no stream"])
def test_formatted_text_comes_back_through_shared_memory(fail):
    """Text rendered by the formatting processes (8 MB per batch here) is written in submission order
    from shared-memory blocks, and every block is unlinked once written, or when the run fails before
    writing it (discard), or when the writer's stream fails as a block is to be written."""
    import os
    from types import SimpleNamespace

    from gpualign.output import parallel

    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    before = set(os.listdir("/dev/shm"))
    pool = parallel.start_pool(4, 2)
    try:
        out = io.BytesIO()
        if fail == "stream":
            writer = parallel.OrderedWriter(_NoStream(), pool)
            with pytest.raises(InputError, match="appears twice"):  # (at a submit, once a batch is formatted, or
                for b in range(3):  # at the flush: it depends on how soon the formatting processes are done)
                    writer.submit(b, None, lambda n: None)
                writer.flush()
            writer.discard()
            pool.shutdown()
            assert not _new_blocks(before)
            return
        writer = parallel.OrderedWriter(SimpleNamespace(fmt=_BigLines(8 << 20), stream=out), pool)
        written = []
        for b in range(5):
            writer.submit(b, None, written.append)
        if fail:
            for fut, *_ in writer.pending:  # formatted, not yet written: blocks made and waiting
                fut.result()
            writer.discard()
            assert not writer.pending and sum(written) + 1 <= 5
        else:
            writer.flush()
            assert written == [1] * 5
            data = out.getvalue()
            assert len(data) == 5 * (8 << 20) and data[::8 << 20] == b"ABCDE"
    finally:
        pool.shutdown()
    assert not _new_blocks(before)


def test_large_cigar_arrays_go_to_the_formatters_in_shared_memory(monkeypatch):
    """A result's CIGAR ops and engine-made text at or above SHARE_MIN bytes reach the formatting process
    through a shared-memory block (unlinked there) and render the same lines as in the parent."""
    import os

    from gpualign.output import parallel

    batch = _batch()
    cfg = AlignConfig(metric="edit")
    res = CpuWfaEngine(threads=1).align(batch, cfg)
    res.cigar_text = C.to_text_buffer(res.cigar, res.cigar_off, res.cigar_len)
    monkeypatch.setattr(parallel, "SHARE_MIN", 64)  # this small batch's arrays count as large
    before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    for keep_text in (True, False):
        r = res if keep_text else dataclasses.replace(res, cigar_text=None)
        sent, shared = parallel._outbound(r)
        assert shared is not None and len(sent.cigar) == 0
        assert (sent.cigar_text[0] is None) if keep_text else sent.cigar_text is None
        back = parallel._inbound(sent, shared)
        assert np.array_equal(back.cigar, res.cigar)
        if keep_text:
            got, want = (np.frombuffer(x.cigar_text[0], np.uint8) for x in (back, res))
            assert np.array_equal(got, want)
        out = io.BytesIO()
        PafWriter(out).write(batch, back)
        ref = io.BytesIO()
        PafWriter(ref).write(batch, r)
        assert out.getvalue() == ref.getvalue()
    if os.path.isdir("/dev/shm"):
        assert not _new_blocks(before)


def test_worker_processes_sized_to_the_input(tmp_path, monkeypatch):
    """-t 0 (all cores): as many CPU engine workers and formatters as the input is worth (none forked for
    the demo's 233 kbp); a chosen -t N, or an input whose size is not known, gets N."""
    from gpualign import workers
    from gpualign.config import AlignConfig
    from gpualign.output import parallel
    from gpualign.pipeline import run_pairs

    assert workers.sized(16, 233_335, 1 << 20) == 1 and workers.sized(16, 3.5 * (1 << 20), 1 << 20) == 3
    assert workers.sized(16, None, 1 << 20) == 16 and workers.sized(0, 10, 1) == 0 and workers.sized(4, 0, 8) == 1
    assert workers.sized(8, 7 << 20, 8 << 20, 0) == 0 and workers.sized(8, 100 << 20, 8 << 20, 0) == 8
    demo = [str(Path(__file__).parent.parent / "data" / "demo" / n) for n in ("a.fa", "b.fa")]
    asked = []
    start = parallel.start_pool
    monkeypatch.setattr(parallel, "start_pool", lambda t: asked.append(t) or start(t))
    notices = []
    for threads, per in ((0, 1 << 20), (0, 1 << 10), (8, 1 << 20)):
        monkeypatch.setattr(workers, "ENGINE_BASES", per)
        monkeypatch.setattr(workers, "FORMAT_BASES", per)
        run_pairs(*demo, str(tmp_path / "o.paf"), None, AlignConfig(device="cpu", threads=threads), "test",
                  on_notice=notices.append)
    n = AlignConfig().n_threads
    assert [int(x.split("WFA2-lib, ")[1].split()[0]) for x in notices] == [1, n, 8]
    assert asked == [0, 2 * (n // 2), 8]
