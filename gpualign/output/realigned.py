"""PAF and SAM/BAM for re-aligned candidates (`gpualign paf`): coordinates on the original sequences."""

from __future__ import annotations

import dataclasses

import numpy as np

from .. import cigar as C
from .. import trace
from ..io.paf import revcomp
from ..records import OK, RANK_KEY, SA_KEY, SECONDARY, SUPPLEMENTARY, Names
from ..text import Strings, join_lines
from .common import cigar_stats, cigar_text, columns
from .sam import BAM_LETTERS, SEQ_TABLE, SamToBam, bam_refusal, clean_reason, header_text, refuse_qnames


def _cs(q: bytes, t: bytes, ops: np.ndarray) -> str:
    """minimap2's short cs: ':N' identical run, '*tq' substitution, '+seq' insertion, '-seq' deletion."""
    out, qi, ti = [], 0, 0
    for v in ops.tolist():
        op, ln = v & 15, v >> 4
        if op == C.EQ:
            out.append(f":{ln}")
            qi += ln
            ti += ln
        elif op == C.X:
            out.append("".join(f"*{chr(t[ti + j]).lower()}{chr(q[qi + j]).lower()}" for j in range(ln)))
            qi += ln
            ti += ln
        elif op == C.I:
            out.append("+" + q[qi:qi + ln].decode().lower())
            qi += ln
        else:
            out.append("-" + t[ti:ti + ln].decode().lower())
            ti += ln
    return "".join(out)


def _ranks(meta, n: int) -> list:
    """Each candidate's rank in its read (realign_primary: PRIMARY, SUPPLEMENTARY or SECONDARY; all primary when
    not decided)."""
    r = meta.get(RANK_KEY)
    return [0] * n if r is None else r.tolist()


def _sam_place(cand, t_start: int, cigar: str) -> tuple[int, str]:
    """A mapped record's POS and CIGAR: the read's unaligned ends soft-clipped (on its strand); insertions alone
    after the target's last base at POS LN, not past the reference's end."""
    left, right = (cand.qlen - cand.qe, cand.qs) if cand.strand == "-" else (cand.qs, cand.qlen - cand.qe)
    return min(int(t_start) + 1, cand.tlen), (f"{left}S" if left else "") + cigar + (f"{right}S" if right else "")


def _sam_columns(batch, res):
    """columns(res), made once a batch: sa_entries (realign_primary, as the batch comes) keeps them in batch.meta
    for sam_records (when it goes on)."""
    c = batch.meta.get(_COLUMNS)
    if c is None:
        c = batch.meta[_COLUMNS] = columns(res)
    return c


_COLUMNS = "columns"  # batch.meta's key for _sam_columns


def sa_entries(batch, res, rows: list) -> list:
    """The SA:Z entry (rname,pos,strand,CIGAR,mapQ,NM;) of each of rows' records, None for one not mapped or whose
    target name holds a ';' (SA:Z's entries would split there: the read's records get no SA:Z; a ',', which would
    split its fields, SAM output refuses in every reference name, check_rnames)."""
    c = _sam_columns(batch, res)
    ts, _ = _coords(batch, res, batch.meta)
    out = []
    for i in rows:
        cand = batch.meta["cands"][i]
        if not _placed(c, i, cand) or ";" in cand.tname:
            out.append(None)
            continue
        pos, cig = _sam_place(cand, ts[i], c.cigar[i])
        out.append(f"{cand.tname},{pos},{cand.strand},{cig},{cand.mapq},{c.nm[i]};")
    return out


def _placed(c, i: int, cand) -> bool:
    """Whether candidate i's record is mapped: aligned, with a CIGAR (an empty query range has none), on a target
    of some length (a zero-length target is no @SQ: its record is unmapped, zr:Z:empty_target, as pairs' is)."""
    return bool(c.ok[i] and c.cigar[i]) and cand.tlen > 0


def _coords(batch, res, meta):
    """Realigned target start/end on the whole target, per pair."""
    win = np.asarray(meta["win_start"], dtype=np.int64)
    if res.t_start is None:
        return win.copy(), win + batch.t_len
    t_end = np.where(res.t_end < 0, batch.t_len, res.t_end)
    return win + res.t_start, win + t_end


def fixed4(num: np.ndarray, den: np.ndarray) -> Strings:
    """f"{num / den:.4f}" of each row (0.0000 where den is 0; 0 <= num <= den) without a Python step per row: the
    quotient rounded to 4 places in integers. Python rounds the double num / den, which lies within half an ulp of
    the quotient and so on the same side of every rounding tie but an exact one; rows exactly on a tie are left to
    Python (whether the double is above, below or on it decides)."""
    num, den = np.asarray(num, np.int64), np.asarray(den, np.int64)
    some = den > 0
    q, r = np.divmod(num * 10000, np.where(some, den, 1))
    k = np.where(some, q + (2 * r > den), 0)
    out = np.empty((len(k), 6), np.uint8)
    out[:, 0] = 48 + k // 10000
    out[:, 1] = ord(".")
    for j, p in enumerate((1000, 100, 10, 1)):
        out[:, 2 + j] = 48 + k // p % 10
    for i in np.flatnonzero(some & (2 * r == den)).tolist():
        out[i] = np.frombuffer(f"{int(num[i]) / int(den[i]):.4f}".encode(), np.uint8)
    return Strings(out.reshape(-1), np.arange(len(k), dtype=np.int64) * 6, np.full(len(k), 6, np.int64))


def _tag_texts(tags: list, second: np.ndarray) -> Strings:
    """Each row's kept input tags, each after a tab, every tp:A tag's value the re-aligned rank's: S where second
    (a secondary), else P (minimap2's I/i, an inversion's, too). A tp:A tag whose value is not one letter is
    rewritten in Python (the bytes are overwritten in place where it is)."""
    raw = np.frombuffer(("\n".join(map("\t".join, tags)) + "\n").encode(), np.uint8)
    ends = np.flatnonzero(raw == 10)
    starts = np.concatenate([[0], ends[:-1] + 1])
    buf = np.insert(raw, starts[ends > starts], 9)  # a tab before each row's first tag
    row = np.cumsum(buf == 10) - (buf == 10)  # each byte's row
    tab = np.flatnonzero(buf[:-6] == 9)
    for j, ch in enumerate(b"tp:A:"):
        tab = tab[buf[tab + 1 + j] == ch]
    one = np.isin(buf[np.minimum(tab + 7, len(buf) - 1)], (9, 10)) & (buf[tab + 6] != 9) & (buf[tab + 6] != 10)
    buf[tab[one] + 6] = np.where(second[row[tab[one]]], ord("S"), ord("P"))
    ends = np.flatnonzero(buf == 10)
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
    out = Strings(buf, starts, ends - starts)
    odd = np.unique(row[tab[~one]])
    if len(odd):
        fixed = [[("tp:A:S" if second[i] else "tp:A:P") if x.startswith("tp:A:") else x for x in tags[i]]
                 for i in odd.tolist()]
        out = out.put(odd, Strings.of(["\t" + "\t".join(t) for t in fixed]))
    return out


class RealignedPafLines:
    """The PAF lines of a batch (render), in the writer's thread or in a formatting process
    (output/parallel.py): the candidates travel in batch.meta; only --cs reads the sequences."""

    def __init__(self, cs: bool = False):
        self.cs = self.needs_seq = cs

    def prepare(self, batch, res):
        """What a formatting process needs of (batch, res): without --cs the engine's own CIGAR text
        and counts, when it made them, stand for the binary ops (not sent)."""
        if not self.cs and res.cigar_text is not None and res.cigar_stats is not None:
            res = dataclasses.replace(res, cigar=np.zeros(0, np.uint32))
        return batch, res

    def split(self, batch, res, parts: int) -> list:
        """prepare()'s (batch, res) cut into about `parts` runs of consecutive rows that render their lines
        alone, so that the formatting processes share a batch (the last batch's lines come sooner). Only
        without --cs and with the engine's text and counts; else the whole, as one."""
        n = res.n
        if self.cs or parts < 2 or n < 2 * parts or res.cigar_text is None or res.cigar_stats is None:
            return [(batch, res)]
        buf, start, length = res.cigar_text
        cut = np.linspace(0, n, parts + 1).astype(np.int64)
        out = []
        for lo, hi in zip(cut[:-1].tolist(), cut[1:].tolist()):
            sl = slice(lo, hi)
            a, b = int(start[sl].min()), int((start[sl] + length[sl]).max())
            part = lambda x: None if x is None else x[sl]  # noqa: E731
            r = dataclasses.replace(res, score=res.score[sl], status=res.status[sl], engine=res.engine[sl],
                                    cigar=res.cigar[:0], cigar_off=res.cigar_off[sl], cigar_len=res.cigar_len[sl],
                                    reason={k - lo: v for k, v in res.reason.items() if lo <= k < hi},
                                    t_start=part(res.t_start), t_end=part(res.t_end),
                                    cigar_text=(buf[a:b], start[sl] - a, length[sl]), cigar_stats=res.cigar_stats[sl])
            bt = dataclasses.replace(batch, q_off=batch.q_off[sl], q_len=batch.q_len[sl], t_off=batch.t_off[sl],
                                     t_len=batch.t_len[sl], index=batch.index[sl], q_names=[], t_names=[],
                                     q_quals=[], t_free=part(batch.t_free),
                                     meta={k: v[sl] for k, v in batch.meta.items()})
            out.append((bt, r))
        return out

    @trace.traced("paf render")
    def render(self, batch, res) -> tuple[bytes, int]:
        """(the batch's lines, how many): built in bulk (text.join_lines), or line by line with --cs."""
        if self.cs:
            return self.render_rows(batch, res)
        rows = np.flatnonzero(res.status == OK)
        if len(rows) == 0:
            return b"", 0
        cands, n = batch.meta["cands"], len(rows)
        ts, te = (v[rows] for v in _coords(batch, res, batch.meta))
        second = np.asarray(_ranks(batch.meta, res.n))[rows] == SECONDARY
        if res.has_cigar:
            tot = cigar_stats(res, gap_opens=True)
            matches, mism, opens = (tot[k][rows] for k in ("matches", "mismatches", "gap_opens"))
            nm = mism + (tot["ins"] + tot["dels"])[rows]
            cig = Strings(*cigar_text(res)).take(rows)
        else:
            matches = mism = opens = nm = np.zeros(n, np.int64)
            cig = Strings(np.zeros(0, np.uint8), nm, nm)
        name = lambda col: Strings.of(col).take(rows)  # noqa: E731
        tags = _tag_texts([cands.tags[i] for i in rows.tolist()], second)
        fields = [name(cands.qname), (b"\t", cands.qlen[rows]), (b"\t", cands.qs[rows]), (b"\t", cands.qe[rows]),
                  (b"\t", name(cands.strand)), (b"\t", name(cands.tname)), (b"\t", cands.tlen[rows]), (b"\t", ts),
                  (b"\t", te), (b"\t", matches), (b"\t", matches + nm), (b"\t", np.where(second, 0, cands.mapq[rows])),
                  (b"\tNM:i:", nm), (b"\tAS:i:", -res.score[rows].astype(np.int64)),
                  (b"\tde:f:", fixed4(mism + opens, matches + mism + opens)), tags, (b"\tcg:Z:", cig)]
        # no CIGAR (an empty alignment): no cg:Z (a tag needs a value)
        return join_lines(fields, n, sep=b"", drop_empty_last=True), n

    def render_rows(self, batch, res) -> tuple[bytes, int]:
        """render's lines made one at a time (with --cs: the tag replays each alignment's operations)."""
        meta = batch.meta
        c = columns(res)
        ts, te = _coords(batch, res, meta)
        ts, te = ts.tolist(), te.tolist()
        gaps = cigar_stats(res, gap_opens=True)["gap_opens"].tolist() if res.has_cigar else [0] * res.n
        ranks = _ranks(meta, res.n)
        lines = []
        for i, cand in enumerate(meta["cands"]):
            if not c.ok[i]:
                continue
            opens = gaps[i]
            denom = c.matches[i] + c.mismatches[i] + opens
            de = (c.mismatches[i] + opens) / denom if denom else 0.0
            # the re-aligned rank, in every tp:A tag (minimap2's I/i, an inversion's, too): P primary or supplementary
            second = ranks[i] == SECONDARY
            kept = [("tp:A:S" if second else "tp:A:P") if t.startswith("tp:A:") else t for t in cand.tags]
            tags = [f"NM:i:{c.nm[i]}", f"AS:i:{-c.score[i]}", f"de:f:{de:.4f}", *kept]
            if c.cigar[i]:  # (a tag needs a value: neither for an empty alignment)
                tags.append(f"cg:Z:{c.cigar[i]}")
            if self.cs and c.cigar[i]:
                ops = res.cigar[res.cigar_off[i]: res.cigar_off[i] + res.cigar_len[i]]
                w = int(meta["win_start"][i])
                t_al = batch.target(i)[ts[i] - w: te[i] - w]
                tags.append(f"cs:Z:{_cs(batch.query(i), t_al, ops)}")
            mapq = 0 if second else cand.mapq
            lines.append(f"{cand.qname}\t{cand.qlen}\t{cand.qs}\t{cand.qe}\t{cand.strand}\t{cand.tname}\t{cand.tlen}\t"
                         f"{ts[i]}\t{te[i]}\t{c.matches[i]}\t{c.block[i]}\t{mapq}\t" + "\t".join(tags) + "\n")
        return "".join(lines).encode(), len(lines)


class RealignedPaf:
    """PAF of re-aligned candidates; write(batch, res) formats here, or output/parallel.OrderedWriter
    has fmt.render run by its processes and writes to stream."""

    def __init__(self, stream, cs: bool = False, **_):
        self.stream, self.fmt = stream, RealignedPafLines(cs)

    def write(self, batch, res) -> int:
        data, n = self.fmt.render(batch, res)
        self.stream.write(data)
        return n

    def close(self):
        pass


def sam_records(batch, res, meta, paf_name: str = "") -> list[str]:
    """paf_name: the PAF file's name as messages show it (a read whose name SAM refuses: the file, its line)."""
    if batch.n:
        refuse_qnames(Names.of(batch.q_names), lambda k: f"line {meta['cands'][k].line}", "PAF", paf_name)
    c = _sam_columns(batch, res)
    ts, _ = _coords(batch, res, meta)
    ranks = _ranks(meta, res.n)
    sa = meta.get(SA_KEY) or [None] * res.n
    out = []
    for i, cand in enumerate(meta["cands"]):
        seq, qual = meta["full_query"][i], meta["full_qual"][i]
        rev = cand.strand == "-"
        mapped = _placed(c, i, cand)
        if rev and mapped:  # (an unmapped record keeps the read as given: FLAG 16 says reversed)
            seq, qual = revcomp(seq), (qual[::-1] if qual else qual)
        s = seq.translate(SEQ_TABLE).decode() or "*"
        q = qual or "*"
        if not mapped:
            why = res.reason.get(i, "failed") if not c.ok[i] else "empty_target" if cand.tlen == 0 else \
                "empty_alignment"
            out.append(f"{cand.qname}\t{4 | (256 if ranks[i] == SECONDARY else 0)}\t*\t0\t0\t*\t*\t0\t0\t{s}\t{q}\t"
                       f"zr:Z:{clean_reason(why)}\n")
            continue
        pos, cig = _sam_place(cand, ts[i], c.cigar[i])
        flag = (16 if rev else 0) | {SECONDARY: 256, SUPPLEMENTARY: 2048}.get(ranks[i], 0)
        mapq = 0 if ranks[i] == SECONDARY else cand.mapq
        out.append(f"{cand.qname}\t{flag}\t{cand.tname}\t{pos}\t{mapq}\t{cig}\t*\t0\t0\t"
                   f"{s}\t{q}\tNM:i:{c.nm[i]}\tAS:i:{-c.score[i]}" + (f"\tSA:Z:{sa[i]}\n" if sa[i] else "\n"))
    return out


class RealignedSam:
    def __init__(self, stream, targets, command_line: str, grouped: bool = True, paf_name: str = "", **_):
        """grouped: each read's candidates together in the PAF (the header's GO:query)."""
        self.stream, self.paf_name = stream, paf_name
        stream.write(header_text(targets.lengths, command_line, grouped))

    def write(self, batch, res, meta) -> int:
        recs = sam_records(batch, res, meta, self.paf_name)
        self.stream.write("".join(recs).encode())
        return len(recs)

    def close(self):
        pass


class RealignedBam:
    def __init__(self, path: str, targets, command_line: str, grouped: bool = True, paf_name: str = "", **_):
        self.out, self.paf_name = SamToBam(path, header_text(targets.lengths, command_line, grouped)), paf_name

    def write(self, batch, res, meta) -> int:
        for name, seq, cand in zip(batch.q_names, meta["full_query"], meta["cands"]):
            if seq.translate(None, BAM_LETTERS):
                raise bam_refusal(name, seq.translate(None, BAM_LETTERS)[0], f"line {cand.line}", self.paf_name)
        recs = sam_records(batch, res, meta, self.paf_name)
        self.out.write("".join(recs).encode())
        return len(recs)

    def close(self):
        self.out.close()

    def abort(self):
        self.out.abort()
