// lines.cu -- text lines assembled on the device (gpualign/text_device.py): the bytes of text.join_lines.
// Line i is its fields joined by a separator and ended by '\n'; a field is a constant prefix followed by row
// i of a string column, row i of an integer column in decimal, or nothing.
//
// spec: SPEC ints per field: its kind (0 prefix only, 1 string, 2 integer), its column, where its prefix
// lies in consts and how long it is, and `drop` (1: an empty string leaves the field out, the separator
// before it too: PAF's cg:Z of an empty CIGAR). consts starts with the separator (sep_len bytes).
// Integer column c, row i: ints[c * n + i]; string column c, row i: sbuf[sstart[c * n + i] ...] of
// slen[c * n + i] bytes.
// line_lengths: a thread per line writes its length; their inclusive prefix sums give each line its end, and
// line_write (a thread per line) writes it there.
// Types: spec int32 [fields * SPEC]; consts, sbuf uint8; ints, sstart, slen int64 [columns * n]; len, ends
// int64 [n]; out uint8 [ends[n - 1]]. Limits: a prefix and the separator under 2^31 bytes; integers any int64
// (the most negative too); a grid of ceil(n / block) blocks.
//
// paf_lengths / paf_write: the same two passes for the PAF lines of `gpualign pairs` (output/paf.py, not
// scored) from the columns the device reader and a GPU engine (eWFA, affine) leave on the device: row i is
// written only where status[i] == ok (else it takes no bytes), as qname ql 0 ql + tname tl 0 tl m m+nm 255
// NM:i:nm AS:i:-score and, for a CIGAR that is not empty, cg:Z:cigar. Types: status uint8, score int32, stats
// int64 [n * 5] (= X I D counts, engines/_results.py's text_kernels), text and names uint8, the rest int64 [n].
//
// sam_lengths / sam_write: the SAM lines of the same batches (output/sam.py, not scored): a pair aligned
// (status[i] == ok and t_len[i] > 0) as qname 0 tname 1 255 cigar * 0 0 seq qual NM:i:nm AS:i:-score, any
// other unmapped as qname 4 * 0 0 * * 0 0 seq qual why, where why is row i of the host's tags (zr:Z:reason:
// why at why_off[i], why_len[i] bytes; read for unmapped rows only), seq the query's bytes with any byte
// SAM's SEQ cannot hold ([A-Za-z=.]) written as N, or * when the query is empty, and qual the query's
// qualities (quals at qual_off[i], q_len[i] bytes; has_qual 0: none) or * when there are none or the query is
// empty. seq (uint8) holds the queries at q_off[i] (int64); the CIGAR and stats of unmapped rows are not read.
// Every kind of line is counted and written by one builder each (LineOut<false> / LineOut<true>).
#ifdef __CUDACC_RTC__  // NVRTC has no C library headers
typedef unsigned char uint8_t;
#else
#include <stdint.h>
#endif

#include "cigar_text.cuh"  // cigar_measure, cigar_write (gpu-dp's CIGARs: engines/gpu_dp.py)

#define SPEC 5
#define KIND_STRING 1
#define KIND_INT 2

__device__ __forceinline__ unsigned long long magnitude(long long v) {
    return v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
}

__device__ __forceinline__ int decimal_width(long long v) {  // digits, and a minus sign
    unsigned long long a = magnitude(v);
    int w = 1;
    while (a >= 10) {
        a /= 10;
        ++w;
    }
    return w + (v < 0);
}

__device__ __forceinline__ void write_decimal(uint8_t* p, long long v, int w) {  // w: decimal_width(v)
    unsigned long long a = magnitude(v);
    if (v < 0) p[0] = '-';
    for (int j = w - 1; j >= (v < 0); --j) {
        p[j] = (uint8_t)('0' + a % 10);
        a /= 10;
    }
}

// A line's bytes counted (WRITE false: nothing read or written through the pointers) or written at p.
template <bool WRITE>
struct LineOut {
    uint8_t* p;
    long long n;
    __device__ void bytes(const uint8_t* s, long long k) {
        if (WRITE)
            for (long long j = 0; j < k; ++j) p[n + j] = s[j];
        n += k;
    }
    __device__ void text(const char* s) {
        for (; *s; ++s, ++n)
            if (WRITE) p[n] = (uint8_t)*s;
    }
    __device__ void seq(const uint8_t* s, long long k) {  // SAM's SEQ: a byte it cannot hold as N
        if (WRITE)
            for (long long j = 0; j < k; ++j) {
                uint8_t c = s[j], l = c | 32;
                p[n + j] = (l >= 'a' && l <= 'z') || c == '=' || c == '.' ? c : (uint8_t)'N';
            }
        n += k;
    }
    __device__ void num(long long v) {
        int w = decimal_width(v);
        if (WRITE) write_decimal(p + n, v, w);
        n += w;
    }
};

// Line i of the spec'd fields (consts, sbuf and sstart are read only when WRITE): its length.
template <bool WRITE>
__device__ long long spec_line(long long i, const int* __restrict__ spec, int fields, int sep_len,
                               const uint8_t* __restrict__ consts, const long long* __restrict__ ints,
                               const uint8_t* __restrict__ sbuf, const long long* __restrict__ sstart,
                               const long long* __restrict__ slen, long long n, uint8_t* p) {
    LineOut<WRITE> o{p, 0};
    for (int k = 0; k < fields; ++k) {
        const int* f = spec + k * SPEC;
        long long sl = f[0] == KIND_STRING ? slen[f[1] * n + i] : 0;
        if (f[0] == KIND_STRING && sl == 0 && f[4]) continue;
        if (k) o.bytes(consts, sep_len);
        o.bytes(WRITE ? consts + f[2] : nullptr, f[3]);
        if (f[0] == KIND_STRING)
            o.bytes(WRITE ? sbuf + sstart[f[1] * n + i] : nullptr, sl);
        else if (f[0] == KIND_INT)
            o.num(ints[f[1] * n + i]);
    }
    o.text("\n");
    return o.n;
}

__global__ void line_lengths(const int* __restrict__ spec, int fields, int sep_len, const long long* __restrict__ ints,
                             const long long* __restrict__ slen, long long n, long long* __restrict__ len) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    len[i] = spec_line<false>(i, spec, fields, sep_len, nullptr, ints, nullptr, nullptr, slen, n, nullptr);
}

__global__ void line_write(const int* __restrict__ spec, int fields, int sep_len, const uint8_t* __restrict__ consts,
                           const long long* __restrict__ ints, const uint8_t* __restrict__ sbuf,
                           const long long* __restrict__ sstart, const long long* __restrict__ slen, long long n,
                           const long long* __restrict__ ends, const long long* __restrict__ len,
                           uint8_t* __restrict__ out) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    spec_line<true>(i, spec, fields, sep_len, consts, ints, sbuf, sstart, slen, n, out + ends[i] - len[i]);
}

template <bool WRITE>
__device__ long long paf_line(long long i, const int* __restrict__ score,
                              const long long* __restrict__ stats, const uint8_t* __restrict__ text,
                              const long long* __restrict__ tstart, const long long* __restrict__ tlen,
                              const uint8_t* __restrict__ names, const long long* __restrict__ qn_off,
                              const long long* __restrict__ qn_len, const long long* __restrict__ tn_off,
                              const long long* __restrict__ tn_len, const long long* __restrict__ q_len,
                              const long long* __restrict__ t_len, uint8_t* p) {
    LineOut<WRITE> o{p, 0};
    const long long* st = stats + 5 * i;
    long long m = st[0], nm = st[1] + st[2] + st[3], ql = q_len[i], tl = t_len[i];
    o.bytes(names + qn_off[i], qn_len[i]);
    o.text("\t");
    o.num(ql);
    o.text("\t0\t");
    o.num(ql);
    o.text("\t+\t");
    o.bytes(names + tn_off[i], tn_len[i]);
    o.text("\t");
    o.num(tl);
    o.text("\t0\t");
    o.num(tl);
    o.text("\t");
    o.num(m);
    o.text("\t");
    o.num(m + nm);
    o.text("\t255\tNM:i:");
    o.num(nm);
    o.text("\tAS:i:");
    o.num(-(long long)score[i]);
    if (tlen[i] > 0) {
        o.text("\tcg:Z:");
        o.bytes(text + tstart[i], tlen[i]);
    }
    o.text("\n");
    return o.n;
}

#define PAF_ARGS                                                                                  \
    const uint8_t *__restrict__ status, int ok, const int *__restrict__ score,                        \
        const long long *__restrict__ stats, const uint8_t *__restrict__ text,                        \
        const long long *__restrict__ tstart, const long long *__restrict__ tlen,                     \
        const uint8_t *__restrict__ names, const long long *__restrict__ qn_off,                      \
        const long long *__restrict__ qn_len, const long long *__restrict__ tn_off,                   \
        const long long *__restrict__ tn_len, const long long *__restrict__ q_len,                    \
        const long long *__restrict__ t_len, long long n
#define PAF_PASS score, stats, text, tstart, tlen, names, qn_off, qn_len, tn_off, tn_len, q_len, t_len

__global__ void paf_lengths(PAF_ARGS, long long* __restrict__ len) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    len[i] = status[i] == ok ? paf_line<false>(i, PAF_PASS, nullptr) : 0;
}

__global__ void paf_write(PAF_ARGS, const long long* __restrict__ ends, const long long* __restrict__ len,
                          uint8_t* __restrict__ out) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n || len[i] == 0) return;
    paf_line<true>(i, PAF_PASS, out + ends[i] - len[i]);
}

template <bool WRITE>
__device__ long long sam_line(long long i, const int* __restrict__ score, const uint8_t* __restrict__ status, int ok,
                              const long long* __restrict__ t_len, const uint8_t* __restrict__ why,
                              const long long* __restrict__ why_off, const long long* __restrict__ why_len,
                              const long long* __restrict__ stats, const uint8_t* __restrict__ text,
                              const long long* __restrict__ tstart, const long long* __restrict__ tlen,
                              const uint8_t* __restrict__ names, const long long* __restrict__ qn_off,
                              const long long* __restrict__ qn_len, const long long* __restrict__ tn_off,
                              const long long* __restrict__ tn_len, const long long* __restrict__ q_len,
                              const uint8_t* __restrict__ seq, const long long* __restrict__ q_off,
                              const uint8_t* __restrict__ quals, const long long* __restrict__ qual_off,
                              int has_qual, uint8_t* p) {
    LineOut<WRITE> o{p, 0};
    const bool mapped = status[i] == ok && t_len[i] > 0;
    long long ql = q_len[i];
    o.bytes(names + qn_off[i], qn_len[i]);
    if (mapped) {
        o.text("\t0\t");
        o.bytes(names + tn_off[i], tn_len[i]);
        o.text("\t1\t255\t");
        o.bytes(text + tstart[i], tlen[i]);
    } else {
        o.text("\t4\t*\t0\t0\t*");
    }
    o.text("\t*\t0\t0\t");
    if (ql > 0)
        o.seq(WRITE ? seq + q_off[i] : nullptr, ql);
    else
        o.text("*");
    o.text("\t");
    if (has_qual && ql > 0)
        o.bytes(WRITE ? quals + qual_off[i] : nullptr, ql);
    else
        o.text("*");
    if (mapped) {
        const long long* st = stats + 5 * i;
        o.text("\tNM:i:");
        o.num(st[1] + st[2] + st[3]);
        o.text("\tAS:i:");
        o.num(-(long long)score[i]);
    } else {
        o.text("\t");
        o.bytes(why + why_off[i], why_len[i]);
    }
    o.text("\n");
    return o.n;
}

#define SAM_ARGS                                                                                      \
    const int *__restrict__ score, const uint8_t *__restrict__ status, int ok,                            \
        const long long *__restrict__ t_len, const uint8_t *__restrict__ why,                             \
        const long long *__restrict__ why_off, const long long *__restrict__ why_len,                     \
        const long long *__restrict__ stats, const uint8_t *__restrict__ text,                            \
        const long long *__restrict__ tstart, const long long *__restrict__ tlen,                         \
        const uint8_t *__restrict__ names, const long long *__restrict__ qn_off,                          \
        const long long *__restrict__ qn_len, const long long *__restrict__ tn_off,                       \
        const long long *__restrict__ tn_len, const long long *__restrict__ q_len,                        \
        const uint8_t *__restrict__ seq, const long long *__restrict__ q_off,                             \
        const uint8_t *__restrict__ quals, const long long *__restrict__ qual_off, int has_qual, long long n
#define SAM_PASS                                                                                            \
    score, status, ok, t_len, why, why_off, why_len, stats, text, tstart, tlen, names, qn_off, qn_len, tn_off, \
        tn_len, q_len, seq, q_off, quals, qual_off, has_qual

__global__ void sam_lengths(SAM_ARGS, long long* __restrict__ len) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    len[i] = sam_line<false>(i, SAM_PASS, nullptr);
}

__global__ void sam_write(SAM_ARGS, const long long* __restrict__ ends, const long long* __restrict__ len,
                          uint8_t* __restrict__ out) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    sam_line<true>(i, SAM_PASS, out + ends[i] - len[i]);
}
