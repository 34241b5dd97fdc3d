"""SAM (text, built in bulk) and BAM (the same records through pysam/htslib)."""

from __future__ import annotations

from .. import __version__
from ..records import AlignBatch, PairBatch
from .common import columns

# SAM SEQ allows [A-Za-z=.]; any other sequence character is written as N
_SEQ_OK = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz=.")
SEQ_TABLE = bytes(c if c in _SEQ_OK else ord("N") for c in range(256))


def header_text(targets: dict, command_line: str) -> str:
    lines = ["@HD\tVN:1.6\tSO:unsorted\tGO:query"]
    lines += [f"@SQ\tSN:{name}\tLN:{ln}" for name, ln in targets.items() if ln > 0]
    cl = command_line.replace("\t", " ").replace("\n", " ")
    lines.append(f"@PG\tID:gpualign\tPN:gpualign\tVN:{__version__}\tCL:{cl}")
    return "\n".join(lines) + "\n"


def _clean(reason: str) -> str:
    return "".join(ch if ch.isprintable() and ch != "\t" else "_" for ch in reason) or "failed"


def records(batch: PairBatch, res: AlignBatch, metric: str) -> list[str]:
    c = columns(res)
    seq = batch.seq.tobytes().translate(SEQ_TABLE).decode("ascii")
    qo, ql, tl = batch.q_off.tolist(), batch.q_len.tolist(), batch.t_len.tolist()
    out = []
    for i in range(batch.n):
        s = seq[qo[i] : qo[i] + ql[i]] or "*"
        q = batch.q_quals[i] if batch.q_quals and batch.q_quals[i] else "*"
        name = batch.q_names[i]
        if not c.ok[i] or tl[i] == 0:
            why = "empty_target" if c.ok[i] else _clean(res.reason.get(i, "failed"))
            out.append(f"{name}\t4\t*\t0\t0\t*\t*\t0\t0\t{s}\t{q}\tzr:Z:{why}\n")
            continue
        if res.has_cigar:
            cig, nm = c.cigar[i], f"\tNM:i:{c.nm[i]}"
        else:
            cig, nm = "*", (f"\tNM:i:{c.score[i]}" if metric == "edit" else "")
        out.append(f"{name}\t0\t{batch.t_names[i]}\t1\t255\t{cig}\t*\t0\t0\t{s}\t{q}{nm}\tAS:i:{-c.score[i]}\n")
    return out


class SamWriter:
    def __init__(self, stream, targets: dict, command_line: str, metric: str, **_):
        self.stream, self.metric = stream, metric
        stream.write(header_text(targets, command_line).encode())

    def write(self, batch: PairBatch, res: AlignBatch) -> int:
        self.stream.write("".join(records(batch, res, self.metric)).encode())
        return batch.n

    def close(self) -> None:
        pass


class BamWriter:
    """BAM through htslib: records are parsed from the SAM text writer's lines."""

    def __init__(self, path: str, targets: dict, command_line: str, metric: str, **_):
        import pysam

        self.metric = metric
        self.header = pysam.AlignmentHeader.from_text(header_text(targets, command_line))
        self.fh = pysam.AlignmentFile(path, "wb", header=self.header)

    def write(self, batch: PairBatch, res: AlignBatch) -> int:
        import pysam

        from_string = pysam.AlignedSegment.fromstring
        for line in records(batch, res, self.metric):
            self.fh.write(from_string(line.rstrip("\n"), self.header))
        return batch.n

    def close(self) -> None:
        self.fh.close()
