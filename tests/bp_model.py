"""A plain-Python transcription of kernels/bp_long.cu's algorithm (banded bit-parallel edit distance in
strips), with the word size and lanes per strip as parameters so that small inputs cross many strips.

It follows the kernel's bookkeeping: the band from the upper bound, each strip's column range, the
all-ones start of a strip (a real path cost), the top score handed down by the strip above, the
stream of bottom-row horizontal deltas, +1 once the strip above has ended, and each lane's score along
its last row (row n's taken from its lane's less the vertical deltas below n). Columns are taken one
at a time, lanes top to bottom (the kernel's skew computes the same values). Used by
tests/test_bp_model.py against edlib; never by the product. The kernel's pruning within the band (strips
that start where the strip above hands their start down, and stop early) is not modelled:
tests/test_bp_long_emu.py runs the kernel itself.
"""

from __future__ import annotations

from gpualign.engines.gpu_long import band


def strip_columns(s: int, rows: int, m: int, klo: int, khi: int) -> tuple[int, int]:
    r0 = s * rows + 1
    return max(1, r0 - khi), min(m, r0 + rows - 1 - klo)


def distance(a: bytes, b: bytes, upper: int, word: int = 32, lanes: int = 32, column: bool = False,
             diagonals: tuple | None = None):
    """Banded distance: exact when it is <= upper (and then equal to the edit distance). column=True:
    the kernel's col_out mode, the last column {row: value} (rows of strips that reach column m; the
    band from upper; only the strips whose rows meet the band by column m run). diagonals: (klo, khi)
    instead of the band of (len(a), len(b), upper)."""
    n, m = len(a), len(b)
    if n == 0 or m == 0:
        return {i: i + m for i in range(n + 1)} if column else max(n, m)
    full = (1 << word) - 1
    top_bit = word - 1
    rows = word * lanes
    klo, khi = band(n, m, upper) if diagonals is None else diagonals
    nstrips = ((min(n, m + khi) if column else n) + rows - 1) // rows
    stream_prev, top_prev = None, {}  # the strip above: bottom-row deltas by column index, tops
    result = None
    col = {0: m}
    for s in range(nstrips):
        r0 = s * rows + 1
        cs, ce = strip_columns(s, rows, m, klo, khi)
        if s > 0:
            pcs, pce = strip_columns(s - 1, rows, m, klo, khi)
        top = r0 - 1 if cs == 1 else top_prev[cs - 1]
        ncs = max(1, r0 + rows - khi)  # the next strip's first column
        last = s == nstrips - 1
        peq, pv, mv, score = [], [], [], []
        for lane in range(lanes):
            base = r0 + lane * word  # 1-based row of bit 0
            eq = {}
            for bit in range(word):
                i = base + bit
                if i <= n:
                    eq[a[i - 1]] = eq.get(a[i - 1], 0) | (1 << bit)
            peq.append(eq)
            pv.append(full)
            mv.append(0)
            score.append(top + (lane + 1) * word)  # the lane's last row, all-vertical start
        stream, tops = {}, {}
        for c in range(cs, ce + 1):
            if s == 0 or c > pce:
                hin = 1
            else:
                hin = stream_prev[c - pcs]
            for lane in range(lanes):
                eq = peq[lane].get(b[c - 1], 0)
                neg, pos = int(hin < 0), int(hin > 0)
                xv = eq | mv[lane]
                e = eq | neg
                xh = ((((e & pv[lane]) + pv[lane]) & full) ^ pv[lane]) | e
                ph = (mv[lane] | ~(xh | pv[lane])) & full
                mh = pv[lane] & xh
                hout = (ph >> top_bit) - (mh >> top_bit)
                score[lane] += hout
                ph = ((ph << 1) | pos) & full
                mh = ((mh << 1) | neg) & full
                pv[lane] = (mh | ~(xv | ph)) & full
                mv[lane] = ph & xv
                hin = hout
            stream[c - cs] = hin
            if c == ncs - 1 and not last:
                tops[c] = score[lanes - 1]
            if last and c == m and n < r0 + rows:  # row n: its lane's last row less the vertical deltas below n
                ln = (n - r0) // word
                below = full & ~((1 << (n - r0 - ln * word + 1)) - 1)
                result = score[ln] - (bin(pv[ln] & below).count("1") - bin(mv[ln] & below).count("1"))
        if ce == m:  # the kernel's col_out: every row of the strip, from each lane's last row upwards
            for lane in range(lanes):
                v = score[lane]
                for bit in range(word - 1, -1, -1):
                    row = r0 + lane * word + bit
                    if row <= n:
                        col[row] = v
                    v -= ((pv[lane] >> bit) & 1) - ((mv[lane] >> bit) & 1)
        stream_prev, top_prev = stream, tops
    return col if column else result


def split_distance(a: bytes, b: bytes, upper: int, word: int = 32, lanes: int = 32) -> int:
    """The host's meet in the middle (gpu_long.bp_distance, split): the first half of b forwards, the
    second half backwards with both strings reversed, in the band of the whole problem."""
    n, m = len(a), len(b)
    m1 = m // 2
    whole = band(n, m, upper)  # the same diagonals in both halves' own coordinates
    f = distance(a, b[:m1], upper, word, lanes, column=True, diagonals=whole)
    r = distance(a[::-1], b[m1:][::-1], upper, word, lanes, column=True, diagonals=whole)
    big = 1 << 30
    return min(f.get(i, big) + r.get(n - i, big) for i in range(n + 1))
