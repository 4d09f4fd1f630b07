/* What the repurposing matrix's two passes share (matrix_pass.c, the plain pass over a block of
 * keys; fused_pass.c, keys computed a tile at a time): the pass's arguments (ob_matrix_pass, one
 * struct, mirrored once in Python by counting/matrix/c_pass.py's MatrixPassArgs and checked
 * against openbench_matrix_pass_layout when the library loads), the binary searches among the
 * windows, the float64 step's keys and the counting of one key. */
#ifndef OPENBENCH_MATRIX_H
#define OPENBENCH_MATRIX_H

#include "counting.h"

/* The factor every rounding bound is widened by for its own evaluation in float64: the value of
 * counting/rounding.py's BOUND_WIDENING (checked equal when the library loads). */
#define OB_BOUND_WIDENING (1.0 + 0x1p-30)

/* One matrix pass's arguments. Fields typed `const void *` hold float (the *_f32 entry points) or
 * double (*_f64) values; `base`, `scale` and `floor` are converted to the keys' precision on entry
 * (as a float argument would be). The fields of a pass that does not read them are 0 (NULL). */
#define OB_MATRIX_PASS_FIELDS(X)                                                                    \
    /* the plain pass's block of keys: `rows` rows of `width` keys, `stride` apart */               \
    X(const void *, keys)                                                                           \
    X(int64_t, stride) X(int64_t, rows) X(int64_t, width)                                           \
    /* the windows [lows[t], highs[t]] (count,), and the cells that place a key among them */       \
    X(const void *, lows) X(const void *, highs)                                                    \
    X(int64_t, count)                                                                               \
    X(const int32_t *, codes)                                                                       \
    X(const int64_t *, impure) X(const int64_t *, ab)                                               \
    X(int64_t, cells)                                                                               \
    X(double, base) X(double, scale)                                                                \
    X(int32_t *, cell_counts) /* cells + 2 counters (the fused pass: + 3) */                        \
    /* what the pass writes: the histograms, the undecided keys, the best pairs */                  \
    X(int64_t *, beyond) X(int64_t *, reached)                                                      \
    X(int64_t, record)                                                                              \
    X(int64_t *, pairs)                                                                             \
    X(int64_t, capacity)                                                                            \
    X(double, floor)                                                                                \
    X(int64_t *, tops)                                                                              \
    X(float *, top_keys)                                                                            \
    X(int64_t, top_capacity)                                                                        \
    X(int64_t *, top_count)                                                                         \
    /* the float64 step: the rows' float64 queries (rows, dims), the stored columns (width, dims) */\
    X(int64_t, kind)                                                                                \
    X(const double *, queries64)                                                                    \
    X(int64_t, dims)                                                                                \
    X(const void *, columns)                                                                        \
    X(const double *, keys64_lo) X(const double *, keys64_hi)                                       \
    /* the fused pass: its float32 queries (rows, dims), the columns in panels, the sum's chunk,    \
     * the L2 terms, the pairs' own windows and, for the keys alone, where they go */                \
    X(const float *, queries) X(const float *, packed)                                              \
    X(int64_t, chunk)                                                                               \
    X(const float *, row_terms) X(const float *, col_terms)                                         \
    X(const double *, pair_terms) X(const double *, pair_norms) X(const double *, centers)          \
    X(double, pair_extra)                                                                           \
    X(float *, out)
typedef struct ob_matrix_pass {
    OB_MATRIX_PASS_FIELDS(OB_DECLARE)
} ob_matrix_pass;

static inline int64_t count_below_f64(const double *values, int64_t first, int64_t last, double x, int strict)
{
    while (first < last) { /* the first index whose value is not below x (strict: < x; else <= x) */
        const int64_t middle = first + (last - first) / 2;
        if (strict ? values[middle] < x : values[middle] <= x) first = middle + 1; else last = middle;
    }
    return first;
}

static inline int64_t count_below_f32(const float *values, int64_t first, int64_t last, float x, int strict)
{
    while (first < last) {
        const int64_t middle = first + (last - first) / 2;
        if (strict ? values[middle] < x : values[middle] <= x) first = middle + 1; else last = middle;
    }
    return first;
}

/* count_below_f32 without branches on the keys for ranges of at most two values (an impure
 * cell's usual ranges): `values` must be readable two past `last` (the fused pass pads them). */
static inline int64_t count_below_padded_f32(const float *values, int64_t first, int64_t last, float x, int strict)
{
    const int64_t n = last - first;
    if (n > 2) return count_below_f32(values, first, last, x, strict);
    const int below0 = strict ? values[first] < x : values[first] <= x;
    const int below1 = strict ? values[first + 1] < x : values[first + 1] <= x;
    return first + (below0 & (n > 0)) + (below1 & (n > 1));
}

static inline double float64_key(int kind, const double *query, const float *column_f32, const double *column_f64,
                                 int64_t dims)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int64_t k = 0;
    for (; k + 4 <= dims; k += 4) {
        double c0, c1, c2, c3;
        if (column_f32) {
            c0 = column_f32[k]; c1 = column_f32[k + 1]; c2 = column_f32[k + 2]; c3 = column_f32[k + 3];
        } else {
            c0 = column_f64[k]; c1 = column_f64[k + 1]; c2 = column_f64[k + 2]; c3 = column_f64[k + 3];
        }
        if (kind == 0) {
            s0 += query[k] * c0; s1 += query[k + 1] * c1; s2 += query[k + 2] * c2; s3 += query[k + 3] * c3;
        } else if (kind == 1) {
            const double d0 = query[k] - c0, d1 = query[k + 1] - c1, d2 = query[k + 2] - c2, d3 = query[k + 3] - c3;
            s0 += d0 * d0; s1 += d1 * d1; s2 += d2 * d2; s3 += d3 * d3;
        } else {
            s0 += fabs(query[k] - c0); s1 += fabs(query[k + 1] - c1);
            s2 += fabs(query[k + 2] - c2); s3 += fabs(query[k + 3] - c3);
        }
    }
    for (; k < dims; ++k) {
        const double c = column_f32 ? (double)column_f32[k] : column_f64[k];
        if (kind == 0) s0 += query[k] * c;
        else if (kind == 1) { const double d = query[k] - c; s0 += d * d; }
        else s0 += fabs(query[k] - c);
    }
    const double total = (s0 + s1) + (s2 + s3);
    return kind == 0 ? total : -total;
}

#ifdef HAVE_AVX512_SCAN
/* The vector float64 keys' end: the dimensions past the last whole vector added to the lanes'
 * ``total``, and the key's sign (a distance is negated). */
static inline double float64_key_rest(int kind, const double *query, const float *column, int64_t k, int64_t dims,
                                      double total)
{
    for (; k < dims; ++k) {
        const double c = column[k];
        if (kind == 0) total += query[k] * c;
        else if (kind == 1) { const double d = query[k] - c; total += d * d; }
        else total += fabs(query[k] - c);
    }
    return kind == 0 ? total : -total;
}

/* float64_key on AVX-512 for float32 columns: eight lanes of partial sums, fused multiply-adds
 * (one rounding each: within the same bound as any other order). */
__attribute__((target("avx512f"))) static inline __m512d float64_step_avx512(int kind, __m512d q, __m512d c, __m512d sum)
{
    if (kind == 0) return _mm512_fmadd_pd(q, c, sum);
    const __m512d d = _mm512_sub_pd(q, c);
    return kind == 1 ? _mm512_fmadd_pd(d, d, sum) : _mm512_add_pd(sum, _mm512_abs_pd(d));
}

__attribute__((target("avx512f"))) static double float64_key_avx512(int kind, const double *query,
                                                                     const float *column, int64_t dims)
{
    /* four independent sums (short dependency chains: the float64 step waits on them); the last
     * dimensions in masked lanes, whose zeros add nothing for any kind */
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd(), s2 = _mm512_setzero_pd(), s3 = _mm512_setzero_pd();
    int64_t k = 0;
    for (; k + 32 <= dims; k += 32) {
        s0 = float64_step_avx512(kind, _mm512_loadu_pd(query + k), _mm512_cvtps_pd(_mm256_loadu_ps(column + k)), s0);
        s1 = float64_step_avx512(kind, _mm512_loadu_pd(query + k + 8),
                                 _mm512_cvtps_pd(_mm256_loadu_ps(column + k + 8)), s1);
        s2 = float64_step_avx512(kind, _mm512_loadu_pd(query + k + 16),
                                 _mm512_cvtps_pd(_mm256_loadu_ps(column + k + 16)), s2);
        s3 = float64_step_avx512(kind, _mm512_loadu_pd(query + k + 24),
                                 _mm512_cvtps_pd(_mm256_loadu_ps(column + k + 24)), s3);
    }
    for (; k < dims; k += 8) {
        const int64_t left = dims - k;
        const __mmask8 lanes = left >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << left) - 1u);
        const __m512d c = _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_maskz_loadu_ps((__mmask16)lanes, column + k)));
        const __m512d sum = float64_step_avx512(kind, _mm512_maskz_loadu_pd(lanes, query + k), c, s0);
        s0 = s1;  /* the next part into the next sum */
        s1 = s2;
        s2 = s3;
        s3 = sum;
    }
    const double total = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(s0, s1), _mm512_add_pd(s2, s3)));
    return kind == 0 ? total : -total;
}
#endif

#ifdef HAVE_AVX512_SCAN
/* float64_key on AVX2 with FMA for float32 columns: four lanes of partial sums (the same bound). */
__attribute__((target("avx2,fma"))) static double float64_key_avx2(int kind, const double *query,
                                                                  const float *column, int64_t dims)
{
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    const __m256d sign = _mm256_set1_pd(-0.0);
    int64_t k = 0;
    for (; k + 8 <= dims; k += 8) {
        const __m256d c0 = _mm256_cvtps_pd(_mm_loadu_ps(column + k));
        const __m256d c1 = _mm256_cvtps_pd(_mm_loadu_ps(column + k + 4));
        const __m256d q0 = _mm256_loadu_pd(query + k), q1 = _mm256_loadu_pd(query + k + 4);
        if (kind == 0) {
            s0 = _mm256_fmadd_pd(q0, c0, s0);
            s1 = _mm256_fmadd_pd(q1, c1, s1);
        } else if (kind == 1) {
            const __m256d d0 = _mm256_sub_pd(q0, c0), d1 = _mm256_sub_pd(q1, c1);
            s0 = _mm256_fmadd_pd(d0, d0, s0);
            s1 = _mm256_fmadd_pd(d1, d1, s1);
        } else {
            s0 = _mm256_add_pd(s0, _mm256_andnot_pd(sign, _mm256_sub_pd(q0, c0)));
            s1 = _mm256_add_pd(s1, _mm256_andnot_pd(sign, _mm256_sub_pd(q1, c1)));
        }
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, _mm256_add_pd(s0, s1));
    return float64_key_rest(kind, query, column, k, dims, (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]));
}

static int fma_there = -1;
#endif

static inline double float64_key_of(int kind, const double *query, const float *column_f32,
                                    const double *column_f64, int64_t dims)
{
#ifdef HAVE_AVX512_SCAN
    if (column_f32) {
        const int isa = chosen_isa();
        if (isa == 1) return float64_key_avx512(kind, query, column_f32, dims);
        if (isa == 2) {
            if (fma_there < 0) fma_there = __builtin_cpu_supports("fma");
            if (fma_there) return float64_key_avx2(kind, query, column_f32, dims);
        }
    }
#endif
    return float64_key(kind, query, column_f32, column_f64, dims);
}

/* One key x of the matrix pass (row i, column j, slot c) against the pass `P` (an ob_matrix_pass):
 * a pure cell's counter counts it; otherwise it is placed among the windows of its impure cell's
 * ranges; with `pair_terms`, those windows are narrowed to the pair's own (half-width from the
 * row's bound polynomial at the column's norm, exact.py's fast_key_bound_terms, plus `pair_extra`,
 * around the thresholds' float64 `centers`; a comparison in float64 off by at most u|x - c|, which
 * the OB_BOUND_WIDENING margin covers); a key still inside one is recomputed in float64 (QUERY, the
 * row's float64 query, non-null) and placed among the float64 windows, and what stays undecided is
 * recorded by position with its range (RECORDED counts them). The plain and the fused pass share
 * it. KEY64: the key's float64 value from the stored values; DEFER(I, J, a, b): whether the pass
 * takes the key's float64 step later (the fused pass: with its rows fetched meanwhile), MATRIX_NOW
 * for now. */
#define MATRIX_NOW(I, J, A, B) 0
#define PLAIN_FLOAT64_KEY(P, T, QUERY, J)                                                           \
    float64_key_of((int)(P).kind, (QUERY), sizeof(T) == 4 ? (const float *)(P).columns + (J) * (P).dims : 0, \
                   sizeof(T) == 4 ? 0 : (const double *)(P).columns + (J) * (P).dims, (P).dims)
/* A key still undecided after its float64 step (a < b) recorded by position with its range, up to
 * the pass's `capacity` (RECORDED counts them all). */
#define MATRIX_RECORD(P, RECORDED, I, J, A, B)                                                      \
    do {                                                                                            \
        if ((A) < (B)) {                                                                            \
            if ((RECORDED) < (P).capacity) {                                                        \
                (P).pairs[3 * (RECORDED)] = (I) * (P).width + (J);                                  \
                (P).pairs[3 * (RECORDED) + 1] = (A);                                                \
                (P).pairs[3 * (RECORDED) + 2] = (B);                                                \
            }                                                                                       \
            ++(RECORDED);                                                                           \
        }                                                                                           \
    } while (0)
#define MATRIX_COUNT_KEY(P, RECORDED, T, BELOW, KEY64, DEFER, KEY, SLOT, I, J, QUERY)             \
    do {                                                                                            \
        const int32_t c_ = (SLOT), code_ = (P).cell_counts[c_];                                     \
        if (__builtin_expect(code_ >= 0, 1)) { (P).cell_counts[c_] = code_ + 1; break; } /* a pure cell */ \
        const T x_ = (KEY);                                                                         \
        const int64_t *range_ = (P).impure + 4 * (int64_t)(-1 - code_);                            \
        int64_t a_ = BELOW((const T *)(P).highs, range_[0], range_[1], x_, 1);                      \
        int64_t b_ = BELOW((const T *)(P).lows, range_[2], range_[3], x_, 0);                       \
        if ((P).pair_terms && a_ < b_) { /* the pair's own window: its own bound from its norms */ \
            const double norm_ = (P).pair_norms[J], *terms_ = (P).pair_terms + 3 * (I);             \
            const double w_ = (((terms_[0] * norm_ + terms_[1]) * norm_ + terms_[2]) + (P).pair_extra) \
                              * OB_BOUND_WIDENING;                                                  \
            while (a_ < b_ && (double)x_ - (P).centers[a_] > w_) ++a_;                              \
            while (b_ > a_ && (P).centers[b_ - 1] - (double)x_ > w_) --b_;                          \
        }                                                                                           \
        if ((P).record && a_ < b_) {                                                                \
            if ((QUERY) && DEFER(I, J, a_, b_)) break; /* the float64 step later, its rows fetched */ \
            if (QUERY) { /* float64 from the stored values */                                      \
                const double key_ = KEY64;                                                          \
                a_ = count_below_f64((P).keys64_hi, a_, b_, key_, 1);                               \
                b_ = count_below_f64((P).keys64_lo, a_, b_, key_, 0);                               \
            }                                                                                       \
            MATRIX_RECORD(P, RECORDED, I, J, a_, b_);                                               \
        }                                                                                           \
        (P).beyond[a_] += 1;                                                                        \
        (P).reached[b_] += 1;                                                                       \
    } while (0)

/* The pure cells' counters (each started from its code, 0) added to the histograms: a pure cell's
 * keys share their a and b. */
static void matrix_pure_counts(const int32_t *cell_counts, int64_t cells, const int64_t *ab, int64_t *beyond,
                               int64_t *reached)
{
    for (int64_t c = 0; c < cells + 2; ++c) {
        if (cell_counts[c] > 0) {
            beyond[ab[4 * c]] += cell_counts[c];
            reached[ab[4 * c + 2]] += cell_counts[c];
        }
    }
}

#endif /* OPENBENCH_MATRIX_H */
