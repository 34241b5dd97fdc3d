// fastx.cu -- strict 2-line FASTA and 4-line FASTQ parsed on the device (io/fastx_device.py): a region of
// raw file bytes (64-byte aligned, zero bytes after its end up to the next 64) becomes record offsets and
// the records' sequences case-folded one after another, the layout every engine takes.
//
// The rules are the host fast path's (io/fastx_fast.py), record by record; a record that breaks one is
// reported (the lowest such record index, by atomicMin into *bad) and the host reads on from it with the
// host parsers, which accept what they accept and name the error of what they refuse:
//   - a record is `step` lines (2: '>' header, sequence; 4: '@' header, sequence, '+' line, quality);
//   - a header is printable ASCII (tab, vertical tab and form feed too); its name, up to the first of
//     those white spaces or the line end, is not empty;
//   - a sequence holds letters (and the `symbols` of general scoring): `fold` maps each allowed byte to
//     its upper case, every other byte (CR included) to 0;
//   - a '+' line is bare or repeats the header after its marker; a quality line is as long as the
//     sequence, of '!'..'~';
//   - the line after a record starts the next record (its marker), unless the record ends the region
//     at the end of the input (eof).
//
// nl_count / nl_emit: each thread looks at CHUNK consecutive bytes (16-byte loads; a byte is a line end
// when it is '\n'); nl_count writes the count per thread, their inclusive prefix sums give each thread
// its first place (the sum before it), nl_emit writes the line ends' offsets there in order.
// fastx_records: a thread per record: offsets and lengths of its name, sequence and quality, checked as
// above but for the sequence and quality bytes, which fastx_compact checks (a warp per record) while it
// folds the sequence into out at out_off.
#ifdef __CUDACC_RTC__  // NVRTC has no C library headers
typedef unsigned char uint8_t;
typedef unsigned int uint32_t;
#else
#include <stdint.h>
#endif

#define CHUNK 64  // bytes per thread in nl_count / nl_emit (a region is padded to it)

__device__ __forceinline__ uint32_t zero_bytes(uint32_t x) {  // 0x80 in each byte of x that is 0, exactly
    return ~(((x & 0x7f7f7f7fu) + 0x7f7f7f7fu) | x | 0x7f7f7f7fu);
}

__device__ __forceinline__ uint32_t newline_bytes(uint32_t x) { return zero_bytes(x ^ 0x0a0a0a0au); }

// counts[t] = line ends among the bytes [t * CHUNK, t * CHUNK + CHUNK) of buf (threads = ceil(n / CHUNK))
__global__ void nl_count(const uint8_t* __restrict__ buf, long long threads, long long* __restrict__ counts) {
    long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (t >= threads) return;
    const uint4* p = (const uint4*)(buf + t * CHUNK);
    int c = 0;
    for (int k = 0; k < CHUNK / 16; ++k) {
        uint4 v = p[k];
        c += __popc(newline_bytes(v.x)) + __popc(newline_bytes(v.y)) + __popc(newline_bytes(v.z)) +
             __popc(newline_bytes(v.w));
    }
    counts[t] = c;
}

// pos[sums[t - 1] ...] = the offsets of the line ends of thread t's bytes, in order (sums: inclusive)
__global__ void nl_emit(const uint8_t* __restrict__ buf, long long threads, const long long* __restrict__ sums,
                        long long* __restrict__ pos) {
    long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (t >= threads) return;
    const uint32_t* p = (const uint32_t*)(buf + t * CHUNK);
    long long at = t ? sums[t - 1] : 0;
    for (int k = 0; k < CHUNK / 4; ++k) {
        uint32_t m = newline_bytes(p[k]);
        while (m) {
            int b = (__ffs(m) - 1) >> 3;  // the lowest byte first (little-endian: the earliest)
            pos[at++] = t * CHUNK + k * 4 + b;
            m &= m - 1;
        }
    }
}

__device__ __forceinline__ bool header_byte(uint8_t c) { return (c >= 32 && c <= 126) || c == 9 || c == 11 || c == 12; }
__device__ __forceinline__ bool blank(uint8_t c) { return c == 32 || c == 9 || c == 11 || c == 12; }

// Record i < records of a region of n bytes whose line ends are nl[0 .. ends) (line j: [j ? nl[j-1] + 1 :
// 0, nl[j]); a line past them, the input's last without its '\n', ends at n). The host holds the region's
// last whole record back unless the region ends the input (eof), so the line after each record is there.
// Writes its name's offset and length, its sequence's, its quality's offset (step 4).
__global__ void fastx_records(const uint8_t* __restrict__ buf, long long n, const long long* __restrict__ nl,
                              long long ends, int step, int eof, long long records,
                              long long* __restrict__ name_off, long long* __restrict__ name_len,
                              long long* __restrict__ seq_off, long long* __restrict__ seq_len,
                              long long* __restrict__ qual_off, int* __restrict__ bad) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= records) return;
    long long j = i * step;
    long long hs = j ? nl[j - 1] + 1 : 0, he = j < ends ? nl[j] : n;
    const uint8_t marker = step == 2 ? '>' : '@';
    bool ok = hs < he && buf[hs] == marker;
    long long name_end = he;
    for (long long p = hs + 1; ok && p < he; ++p) {
        uint8_t c = buf[p];
        ok = header_byte(c);
        if (blank(c) && name_end == he) name_end = p;
    }
    ok = ok && name_end > hs + 1;
    long long ss = he + 1, se = j + 1 < ends ? nl[j + 1] : n;
    if (step == 4 && ok) {
        long long ps = se + 1, pe = j + 2 < ends ? nl[j + 2] : n, qs = pe + 1, qe = j + 3 < ends ? nl[j + 3] : n;
        ok = ps < pe && buf[ps] == '+' && qe - qs == se - ss;
        if (ok && pe - ps > 1) {  // '+' and the header again
            ok = pe - ps == he - hs;
            for (long long p = 1; ok && p < pe - ps; ++p) ok = buf[ps + p] == buf[hs + p];
        }
        qual_off[i] = qs;
    }
    // the next line starts the next record, unless this one ends the input
    long long next = j + step - 1 < ends ? nl[j + step - 1] + 1 : n;
    if (ok && !(eof && next >= n)) ok = next < n && buf[next] == marker;
    name_off[i] = hs + 1;
    name_len[i] = name_end - hs - 1;
    seq_off[i] = ss;
    seq_len[i] = se - ss;
    if (!ok) atomicMin(bad, (int)i);
}

// Records [0, records): a warp each folds its sequence into out[out_off[i] ...] through fold (256 entries:
// 0 for a byte a sequence cannot hold) and checks its quality (fastq); *bad = the lowest record refused.
// (With the names' offsets and lengths and a table that keeps every byte, it gathers the names.)
__global__ void fastx_compact(const uint8_t* __restrict__ buf, const long long* __restrict__ seq_off,
                              const long long* __restrict__ seq_len, const long long* __restrict__ qual_off,
                              int fastq, long long records, const long long* __restrict__ out_off,
                              const uint8_t* __restrict__ fold, uint8_t* __restrict__ out, int* __restrict__ bad) {
    long long i = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (i >= records) return;
    const uint8_t* s = buf + seq_off[i];
    uint8_t* o = out + out_off[i];
    long long len = seq_len[i];
    bool ok = true;
    for (long long p = lane; p < len; p += 32) {
        uint8_t c = fold[s[p]];
        ok &= c != 0;
        o[p] = c;
    }
    if (fastq) {
        const uint8_t* q = buf + qual_off[i];
        for (long long p = lane; p < len; p += 32) ok &= q[p] >= 33 && q[p] <= 126;
    }
    if (!ok) atomicMin(bad, (int)i);
}

// `gpualign paf`'s candidates (io/paf_device.py): segment i of a block of raw FASTA/FASTQ bytes is the bases
// [0, n) of one record's lines from raw_off, laid out as its .fai says (per_line bases a line, width bytes
// with the line end, the first base in column p0). Every base must fold (fold: 0 for a byte a sequence
// cannot hold), and every line end inside the segment must be "\n" (width - per_line == 1) or "\r\n" (2):
// then the bases are what io/faidx.py's slice gives, case-folded. Bases [w0, w1) are written to out at
// out_off, reversed and complemented through comp where rc[i]. *bad = the lowest segment refused.
// segs: 8 int64 a segment: raw_off, n, p0, per_line, width, w0, w1, out_off. A warp per segment.
extern "C" __global__ void fasta_windows(const uint8_t* __restrict__ buf, const long long* __restrict__ segs,
                                         const uint8_t* __restrict__ rc, long long count,
                                         const uint8_t* __restrict__ fold, const uint8_t* __restrict__ comp,
                                         uint8_t* __restrict__ out, int* __restrict__ bad) {
    long long i = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (i >= count) return;
    const long long* g = segs + 8 * i;
    long long raw_off = g[0], n = g[1], p0 = g[2], per = g[3], width = g[4], w0 = g[5], w1 = g[6];
    uint8_t* o = out + g[7];
    const uint8_t* s = buf + raw_off;  // base 0 of the segment
    bool one_line = p0 + n <= per, reverse = rc[i] != 0, ok = true;
    long long eol = width - per;
    for (long long j = lane; j < n; j += 32) {
        long long pos = p0 + j, src = j;  // (src: from base 0)
        if (!one_line) {
            long long line = pos / per, col = pos - line * per;
            src = line * width + col - p0;
            if (col == per - 1 && j < n - 1)  // a line end follows, inside the segment
                ok &= eol == 1 ? s[src + 1] == '\n' : (eol == 2 && s[src + 1] == '\r' && s[src + 2] == '\n');
        }
        uint8_t c = fold[s[src]];
        ok &= c != 0;
        if (j >= w0 && j < w1) {
            if (reverse)
                o[w1 - 1 - j] = comp[c];
            else
                o[j - w0] = c;
        }
    }
    if (!ok) atomicMin(bad, (int)i);
}
