/* One read pass over score rows: how many candidates score better than a row's window, inside
 * it, or NaN. The window of row i is [low_i, high_i]; with low == high it is the target score
 * itself, and "inside" means "tied". Exact ranks (see exact.py) widen it by a rounding-error
 * bound and re-score only the candidates inside, whose columns this pass also records (the
 * first `capacity` of each row) so that nobody has to read the block again to find them.
 * Loaded with ctypes (no Python headers needed); the caller splits rows across threads, and
 * ctypes releases the GIL during the call.
 *
 * `nans` NULL: the caller proved every score finite, and the pass makes two comparisons per
 * candidate instead of three (no NaN count). Comparisons are IEEE-exact: compile without -ffast-math. Counters are 32-bit inside a row
 * (rows are at most 2^31 - 1 wide), which lets the compiler vectorise the inner loop; columns are
 * taken in spans of SPAN, and only a span holding an inside candidate is read a second time
 * (from cache) to record where.
 */
#include <stdint.h>
#include <stdlib.h>

/* Columns per span: long enough that the per-span sums of the three counters cost little (64
 * made them a third of the pass), short enough that the spans read again to record positions
 * stay few and in L1 (1024 doubled the pass at exact ranks' usual 1e-4 of candidates inside). */
#define SPAN 256

/* The counting pass is compiled for AVX-512 and AVX2 as well, chosen at load time by the CPU
 * (GCC's function multi-versioning on Linux; elsewhere the one baseline build). The comparisons
 * are the same IEEE comparisons in every version. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define COUNT_TARGETS __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define COUNT_TARGETS
#endif

#define COUNT_ROWS(NAME, T)                                                                         \
    COUNT_TARGETS void NAME(const T *scores, int64_t stride, int64_t width, int64_t row_begin,      \
                            int64_t row_end, const T *lows, const T *highs, int lower_is_better,  \
                            int64_t *better, int64_t *inside, int64_t *nans, int64_t *positions,  \
                            int64_t capacity)                                                      \
    {                                                                                               \
        for (int64_t i = row_begin; i < row_end; ++i) {                                             \
            const T *row = scores + i * stride;                                                     \
            const T low = lows[i], high = highs[i];                                                 \
            int64_t g = 0, e = 0, n = 0;                                                            \
            for (int64_t first = 0; first < width; first += SPAN) {                                 \
                const int64_t last = first + SPAN < width ? first + SPAN : width;                   \
                int32_t gs = 0, es = 0, ns = 0;                                                     \
                if (!nans) { /* finite scores: inside = reached - beyond (low <= high), 2 tests */  \
                    int32_t reached = 0;                                                            \
                    if (lower_is_better) {                                                          \
                        for (int64_t j = first; j < last; ++j) {                                    \
                            gs += row[j] < low;                                                     \
                            reached += row[j] <= high;                                              \
                        }                                                                           \
                    } else {                                                                        \
                        for (int64_t j = first; j < last; ++j) {                                    \
                            gs += row[j] > high;                                                    \
                            reached += row[j] >= low;                                               \
                        }                                                                           \
                    }                                                                               \
                    es = reached - gs;                                                              \
                } else if (lower_is_better) {                                                       \
                    for (int64_t j = first; j < last; ++j) {                                        \
                        const T x = row[j];                                                         \
                        gs += x < low;                                                              \
                        es += (x >= low) & (x <= high);                                             \
                        ns += x != x;                                                               \
                    }                                                                               \
                } else {                                                                            \
                    for (int64_t j = first; j < last; ++j) {                                        \
                        const T x = row[j];                                                         \
                        gs += x > high;                                                             \
                        es += (x >= low) & (x <= high);                                             \
                        ns += x != x;                                                               \
                    }                                                                               \
                }                                                                                   \
                if (es && positions) {                                                              \
                    int64_t *out = positions + i * capacity;                                        \
                    for (int64_t j = first; j < last; ++j) {                                        \
                        const T x = row[j];                                                         \
                        if (x >= low && x <= high) {                                                \
                            if (e < capacity) out[e] = j;                                           \
                            ++e;                                                                    \
                        }                                                                           \
                    }                                                                               \
                } else {                                                                            \
                    e += es;                                                                        \
                }                                                                                   \
                g += gs;                                                                            \
                n += ns;                                                                            \
            }                                                                                       \
            better[i] = g;                                                                          \
            inside[i] = e;                                                                          \
            if (nans) nans[i] = n;                                                                  \
        }                                                                                           \
    }

COUNT_ROWS(openbench_count_window_f32, float)
COUNT_ROWS(openbench_count_window_f64, double)

/* Exact ranks' re-scoring (exact.py): float64 keys of (query, candidate) pairs, where the
 * candidate vectors are the rows of a table in the fast precision (read without rounding), and,
 * in the same read of each row, its norms and whether it equals the pair's true answer's vector.
 *
 * kind 0: key = q . c (dot products); 1: key = -||q - c||^2 (squared L2); 2: key = -||q - c||_1.
 * Sums run over four interleaved partial sums: any order of the d additions satisfies the bound
 * exact.py uses (gamma_d on the sum of magnitudes), and four chains keep the adder busy.
 * The squared norm gets width * 2^-1074 added: x*x may underflow (float64 tables of values below
 * 2^-537), and that term restores an upper bound on the exact sum of squares.
 */
#include <math.h>

#define SUBNORMAL_MIN 4.9406564584124654e-324

/* Candidate rows are read in the pairs' order, scattered over the table: the rows PREFETCH_AHEAD
 * pairs ahead are requested while this one is summed. */
#define PREFETCH_AHEAD 4

static inline void prefetch_row(const void *row, int64_t bytes)
{
#if defined(__GNUC__)
    for (int64_t offset = 0; offset < bytes; offset += 64) __builtin_prefetch((const char *)row + offset, 0, 0);
#else
    (void)row;
    (void)bytes;
#endif
}

/* One coordinate into partial sums LANE: its square, its magnitude, its part of the key (KEY_TERM,
 * of the query value q[K] and candidate value x) and whether it equals the truth's. */
#define PAIR_TERM(K, LANE, KEY_TERM)                                                                \
    {                                                                                               \
        const double x = (double)c[K];                                                              \
        sq##LANE += x * x;                                                                          \
        ab##LANE += fabs(x);                                                                        \
        acc##LANE += KEY_TERM(q[K], x);                                                             \
        if (t) equal &= c[K] == t[K];                                                               \
    }

#define DOT_TERM(a, x) ((a) * (x))
#define L2_TERM(a, x) (((a) - (x)) * ((a) - (x)))
#define L1_TERM(a, x) fabs((a) - (x))

#define PAIR_LOOP(KEY_TERM)                                                                         \
    for (; k + 4 <= width; k += 4) {                                                                \
        PAIR_TERM(k, 0, KEY_TERM) PAIR_TERM(k + 1, 1, KEY_TERM)                                     \
        PAIR_TERM(k + 2, 2, KEY_TERM) PAIR_TERM(k + 3, 3, KEY_TERM)                                 \
    }                                                                                               \
    for (; k < width; ++k) PAIR_TERM(k, 0, KEY_TERM)

/* The key of one float64 query row q against one candidate row c (both `width` values), the norms
 * of c, and (when t is given) whether c equals the row t value for value. */
#define PAIR_KEY(NAME, T)                                                                           \
    static inline void NAME(int kind, const double *q, const T *c, const T *t, int64_t width,       \
                            double *key, double *norm2, double *norm1, int *same)                   \
    {                                                                                               \
        double acc0 = 0.0, acc1 = 0.0, acc2 = 0.0, acc3 = 0.0;                                      \
        double sq0 = 0.0, sq1 = 0.0, sq2 = 0.0, sq3 = 0.0;                                          \
        double ab0 = 0.0, ab1 = 0.0, ab2 = 0.0, ab3 = 0.0;                                          \
        int equal = 1;                                                                              \
        int64_t k = 0;                                                                              \
        if (kind == 0) {                                                                            \
            PAIR_LOOP(DOT_TERM)                                                                     \
        } else if (kind == 1) {                                                                     \
            PAIR_LOOP(L2_TERM)                                                                      \
        } else {                                                                                    \
            PAIR_LOOP(L1_TERM)                                                                      \
        }                                                                                           \
        const double total = (acc0 + acc1) + (acc2 + acc3);                                         \
        *key = kind == 0 ? total : -total;                                                          \
        *norm2 = sqrt(((sq0 + sq1) + (sq2 + sq3)) + (double)width * SUBNORMAL_MIN);                 \
        *norm1 = (ab0 + ab1) + (ab2 + ab3);                                                         \
        if (same) *same = equal;                                                                    \
    }

PAIR_KEY(pair_key_f32, float)
PAIR_KEY(pair_key_f64, double)

/* Pair p: query row rows[p], candidate row cols[p] of the table, and truth row rows[p] of `truths`
 * (the true answers' candidate vectors, in the table's precision): identical[p] tells whether the
 * candidate equals it (identical and truths may be NULL). */
#define PAIR_KEYS(NAME, T, KEY)                                                                     \
    void NAME(int kind, const double *queries, const T *truths, int64_t width, const T *table,      \
              int64_t stride, const int64_t *rows, const int64_t *cols, int64_t count, double *keys,  \
              double *norm2, double *norm1, uint8_t *identical)                                     \
    {                                                                                               \
        for (int64_t p = 0; p < count; ++p) {                                                       \
            if (p + PREFETCH_AHEAD < count) prefetch_row(table + cols[p + PREFETCH_AHEAD] * stride, \
                                                         width * (int64_t)sizeof(T));               \
            int same = 0;                                                                           \
            KEY(kind, queries + rows[p] * width, table + cols[p] * stride,                          \
                identical ? truths + rows[p] * width : 0, width, keys + p, norm2 + p, norm1 + p,    \
                identical ? &same : 0);                                                             \
            if (identical) identical[p] = (uint8_t)same;                                            \
        }                                                                                           \
    }

PAIR_KEYS(openbench_pair_keys_f32, float, pair_key_f32)
PAIR_KEYS(openbench_pair_keys_f64, double, pair_key_f64)

/* Row norms of a table (rows 0 .. count - 1): sqrt of the sum of squares (plus width * 2^-1074,
 * as above) and the sum of magnitudes, in float64. */
#define ROW_NORMS(NAME, T)                                                                          \
    void NAME(const T *table, int64_t stride, int64_t width, int64_t count, double *norm2,          \
              double *norm1)                                                                        \
    {                                                                                               \
        for (int64_t p = 0; p < count; ++p) {                                                       \
            const T *c = table + p * stride;                                                        \
            double sq0 = 0.0, sq1 = 0.0, sq2 = 0.0, sq3 = 0.0;                                      \
            double ab0 = 0.0, ab1 = 0.0, ab2 = 0.0, ab3 = 0.0;                                      \
            int64_t k = 0;                                                                          \
            for (; k + 4 <= width; k += 4) {                                                        \
                NORM_TERM(k, 0) NORM_TERM(k + 1, 1) NORM_TERM(k + 2, 2) NORM_TERM(k + 3, 3)         \
            }                                                                                       \
            for (; k < width; ++k) NORM_TERM(k, 0)                                                  \
            norm2[p] = sqrt(((sq0 + sq1) + (sq2 + sq3)) + (double)width * SUBNORMAL_MIN);           \
            norm1[p] = (ab0 + ab1) + (ab2 + ab3);                                                   \
        }                                                                                           \
    }

#define NORM_TERM(K, LANE)                                                                          \
    {                                                                                               \
        const double x = (double)c[K];                                                              \
        sq##LANE += x * x;                                                                          \
        ab##LANE += fabs(x);                                                                        \
    }

ROW_NORMS(openbench_row_norms_f32, float)
ROW_NORMS(openbench_row_norms_f64, double)

/* Exact ranks' queries (exact.py): for each of `count` rows, the query vector in float64 from a
 * stored anchor row and relation row, by a formula code, and the norms of its magnitude (the same
 * formula on absolute values, every term counted positive), as `openbench_row_norms` gives them.
 *
 * codes: 0 a + r, 1 a - r, 2 a * r (real rows of `width` values); 3 a * r, 4 a * conj(r) (complex
 * rows of `width` numbers stored as interleaved (re, im) pairs; the query is written as [Re | Im]
 * halves, 2 * width values, as exact.py's real_rows). Each component is computed as the scorers'
 * query_formula computes it (same operations, same order), so both give the same float64 values.
 * With `truths` (the true answers' candidate vectors, count rows of the query's width), also each
 * true answer's key (`kind`, as openbench_pair_keys) and norms, while the query row is in cache.
 * Strides count T elements.
 */
/* real rows: component K of the query (QUERY) and of its magnitude (MAGNITUDE) from x = a[K],
 * y = r[K], into partial sums LANE */
#define REAL_TERM(K, LANE, QUERY, MAGNITUDE)                                                        \
    {                                                                                               \
        const double x = (double)a[K], y = (double)r[K];                                            \
        const double v = QUERY;                                                                     \
        const double m = MAGNITUDE;                                                                 \
        q[K] = v;                                                                                   \
        sq##LANE += m * m;                                                                          \
        ab##LANE += m;                                                                              \
    }

#define REAL_LOOP(QUERY, MAGNITUDE)                                                                 \
    for (; k + 2 <= width; k += 2) {                                                                \
        REAL_TERM(k, 0, QUERY, MAGNITUDE) REAL_TERM(k + 1, 1, QUERY, MAGNITUDE)                     \
    }                                                                                               \
    for (; k < width; ++k) REAL_TERM(k, 0, QUERY, MAGNITUDE)

#define QUERY_ROWS(NAME, T, KEY)                                                                    \
    void NAME(int code, const T *entities, int64_t entity_stride, const T *relations,               \
              int64_t relation_stride, const int64_t *anchors, const int64_t *relation_ids,         \
              int64_t count, int64_t width, double *queries, double *norm2, double *norm1,          \
              int kind, const T *truths, double *true_keys, double *true_norm2, double *true_norm1) \
    {                                                                                               \
        const int complex_rows = code >= 3;                                                         \
        const int64_t out_width = complex_rows ? 2 * width : width;                                 \
        for (int64_t i = 0; i < count; ++i) {                                                       \
            const T *a = entities + anchors[i] * entity_stride;                                     \
            const T *r = relations + relation_ids[i] * relation_stride;                             \
            double *q = queries + i * out_width;                                                    \
            double sq0 = 0.0, sq1 = 0.0, ab0 = 0.0, ab1 = 0.0;                                      \
            int64_t k = 0;                                                                          \
            if (code == 0) {                                                                        \
                REAL_LOOP(x + y, fabs(x) + fabs(y))                                                 \
            } else if (code == 1) {                                                                 \
                REAL_LOOP(x - y, fabs(x) + fabs(y))                                                 \
            } else if (code == 2) {                                                                 \
                REAL_LOOP(x * y, fabs(v))                                                           \
            } else {                                                                                \
                for (; k < width; ++k) {                                                            \
                    const double are = (double)a[2 * k], aim = (double)a[2 * k + 1];                \
                    const double rre = (double)r[2 * k], rim = (double)r[2 * k + 1];                \
                    if (code == 3) {                                                                \
                        q[k] = are * rre - aim * rim;                                               \
                        q[width + k] = are * rim + aim * rre;                                       \
                    } else {                                                                        \
                        q[k] = are * rre + aim * rim;                                               \
                        q[width + k] = aim * rre - are * rim;                                       \
                    }                                                                               \
                    const double mre = fabs(are * rre) + fabs(aim * rim);                           \
                    const double mim = fabs(are * rim) + fabs(aim * rre);                           \
                    sq0 += mre * mre;                                                               \
                    sq1 += mim * mim;                                                               \
                    ab0 += mre;                                                                     \
                    ab1 += mim;                                                                     \
                }                                                                                   \
            }                                                                                       \
            norm2[i] = sqrt((sq0 + sq1) + (double)out_width * SUBNORMAL_MIN);                       \
            norm1[i] = ab0 + ab1;                                                                   \
            if (truths) KEY(kind, q, truths + i * out_width, 0, out_width, true_keys + i,           \
                            true_norm2 + i, true_norm1 + i, 0);                                     \
        }                                                                                           \
    }

QUERY_ROWS(openbench_query_rows_f32, float, pair_key_f32)
QUERY_ROWS(openbench_query_rows_f64, double, pair_key_f64)

/* The fewest binary fraction digits f such that each of `count` stored values is a multiple of
 * 2^-f (0 for integers; zeros count for nothing), read from the bit patterns in one pass: a
 * finite value is M · 2^(E - bias) with M its significand as an integer (the implicit bit set for
 * normal numbers), so f = bias - E - (trailing zero bits of M). -1 when a value is infinite or
 * NaN (exact.py's fraction_bits; its numpy path is the reference). */
static inline int trailing_zeros64(uint64_t x)
{
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(x);
#else
    int n = 0;
    while (!(x & 1u)) { x >>= 1; ++n; }
    return n;
#endif
}

int64_t openbench_fraction_bits_f32(const float *values, int64_t count)
{
    const uint32_t *bits = (const uint32_t *)values;
    int64_t best = 0;
    for (int64_t i = 0; i < count; ++i) {
        const uint32_t u = bits[i];
        const int64_t exponent = (u >> 23) & 0xFF;
        if (exponent == 0xFF) return -1;
        const uint64_t significand = (u & 0x7FFFFFu) | (exponent ? 0x800000u : 0u);
        if (!significand) continue;
        const int64_t digits = 150 - (exponent ? exponent : 1) - trailing_zeros64(significand);
        if (digits > best) best = digits;
    }
    return best;
}

int64_t openbench_fraction_bits_f64(const double *values, int64_t count)
{
    const uint64_t *bits = (const uint64_t *)values;
    int64_t best = 0;
    for (int64_t i = 0; i < count; ++i) {
        const uint64_t u = bits[i];
        const int64_t exponent = (int64_t)((u >> 52) & 0x7FF);
        if (exponent == 0x7FF) return -1;
        const uint64_t significand = (u & 0xFFFFFFFFFFFFFull) | (exponent ? (1ull << 52) : 0ull);
        if (!significand) continue;
        const int64_t digits = 1075 - (exponent ? exponent : 1) - trailing_zeros64(significand);
        if (digits > best) best = digits;
    }
    return best;
}

/* ------------------------------------------------------------------------------------------
 * The fused chunk count (chain.py's embedding path): one call per block of candidates, made
 * right after the block's GEMM while its scores are still in cache. Per row i of the block
 * (candidates start .. start + width - 1):
 *
 * 1. the excluded entries (the true answer's column, and the known answers of the row that fall
 *    in this chunk: known_cols[known_offsets[i] .. known_offsets[i + 1]), sorted global ids) are
 *    read; with a window they are overwritten with the worst value first (so that the scan
 *    records none of them), a NaN among them counted in nans[i];
 * 2. the row is scanned once: candidates beyond the window on the better side, inside it
 *    (and NaN where nans is given), the inside ones' global ids appended to positions[i, ...]
 *    while fill[i] < capacity (fill[i] counts all of them, across the chunks of a side; a point
 *    window, low == high, records none: its inside candidates are exact ties);
 * 3. better[i] and inside[i] grow by the scan's counts less the excluded entries' own.
 *
 * true_differs[i] (may be NULL) tells whether the true column held a value other than
 * true_scores[i] (fast ranks: a score computed differently); untouched when the true answer is
 * elsewhere. Without a window (window == 0) lows == highs are the true scores and nothing is
 * overwritten. Same contract as counts.py's count_block (its reference), summed over chunks.
 */
#include <string.h>

static int64_t lower_bound_i64(const int64_t *values, int64_t first, int64_t last, int64_t key)
{
    while (first < last) {
        const int64_t middle = first + (last - first) / 2;
        if (values[middle] < key) first = middle + 1;
        else last = middle;
    }
    return first;
}

/* The positions start + k of a span's candidates inside the window [low, high] (k = first ..
 * last - 1), written to out up to capacity and counted in *fill: every scan's recording step. */
#define RECORD_INSIDE(T, row, first, last, low, high, start, out, fill, capacity)                   \
    for (int64_t k = (first); k < (last); ++k) {                                                    \
        const T y = (row)[k];                                                                       \
        if (y >= (low) && y <= (high)) {                                                            \
            if (*(fill) < (capacity)) (out)[*(fill)] = (start) + k;                                 \
            ++*(fill);                                                                              \
        }                                                                                           \
    }

/* The portable scan of one row: counts beyond / inside / NaN, and positions as above. */
#define SCAN_ROW(NAME, T)                                                                           \
    static void NAME(const T *row, int64_t width, T low, T high, int lower_is_better, int check_nan, \
                     int64_t start, int64_t *out, int64_t *fill, int64_t capacity, int64_t *g_out,  \
                     int64_t *e_out, int64_t *n_out)                                                \
    {                                                                                               \
        int64_t g = 0, e = 0, n = 0;                                                                \
        for (int64_t first = 0; first < width; first += SPAN) {                                     \
            const int64_t last = first + SPAN < width ? first + SPAN : width;                       \
            int32_t gs = 0, es = 0, ns = 0;                                                         \
            if (!check_nan) {                                                                       \
                int32_t reached = 0;                                                                \
                if (lower_is_better) {                                                              \
                    for (int64_t j = first; j < last; ++j) {                                        \
                        gs += row[j] < low;                                                         \
                        reached += row[j] <= high;                                                  \
                    }                                                                               \
                } else {                                                                            \
                    for (int64_t j = first; j < last; ++j) {                                        \
                        gs += row[j] > high;                                                        \
                        reached += row[j] >= low;                                                   \
                    }                                                                               \
                }                                                                                   \
                es = reached - gs;                                                                  \
            } else if (lower_is_better) {                                                           \
                for (int64_t j = first; j < last; ++j) {                                            \
                    const T x = row[j];                                                             \
                    gs += x < low;                                                                  \
                    es += (x >= low) & (x <= high);                                                 \
                    ns += x != x;                                                                   \
                }                                                                                   \
            } else {                                                                                \
                for (int64_t j = first; j < last; ++j) {                                            \
                    const T x = row[j];                                                             \
                    gs += x > high;                                                                 \
                    es += (x >= low) & (x <= high);                                                 \
                    ns += x != x;                                                                   \
                }                                                                                   \
            }                                                                                       \
            if (es && out) RECORD_INSIDE(T, row, first, last, low, high, start, out, fill, capacity)     \
            g += gs;                                                                                \
            e += es;                                                                                \
            n += ns;                                                                                \
        }                                                                                           \
        *g_out = g;                                                                                 \
        *e_out = e;                                                                                 \
        *n_out = n;                                                                                 \
    }

SCAN_ROW(scan_row_f32, float)
SCAN_ROW(scan_row_f64, double)

/* AVX-512 scans (x86-64 with GCC or clang): the counters stay in vector lanes for the whole row
 * and each span only asks its inside mask whether to record positions, so no horizontal sum is
 * taken before the row ends. Chosen at run time where the CPU has AVX-512F. */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define HAVE_AVX512_SCAN 1
#include <immintrin.h>

/* One row, one direction and NaN policy: BETTER_OP against BETTER_BOUND counts the candidates
 * beyond the window, REACHED_OP against REACHED_BOUND those beyond or inside it; their lane-wise
 * difference, compared with the previous span's, tells whether a span holds an inside candidate. */
#define SCAN_LOOP_AVX512(T, VEC, LANES, MASK, LOADU, MASKZ_LOADU, CMP, CMPI, SUB, ACCADD, BETTER_OP,      \
                         BETTER_BOUND, REACHED_OP, REACHED_BOUND, NAN)                                  \
    for (int64_t first = 0; first < width; first += SPAN) {                                         \
        const int64_t last = first + SPAN < width ? first + SPAN : width;                           \
        int64_t j = first;                                                                          \
        for (; j + LANES <= last; j += LANES) {                                                     \
            const VEC x = LOADU(row + j);                                                           \
            acc_g = ACCADD(acc_g, CMP(x, BETTER_BOUND, BETTER_OP));                                 \
            acc_r = ACCADD(acc_r, CMP(x, REACHED_BOUND, REACHED_OP));                               \
            if (NAN) acc_n = ACCADD(acc_n, CMP(x, x, _CMP_UNORD_Q));                                \
        }                                                                                           \
        if (j < last) {                                                                             \
            const MASK valid = (MASK)(((uint64_t)1 << (last - j)) - 1);                             \
            const VEC x = MASKZ_LOADU(valid, row + j);                                              \
            acc_g = ACCADD(acc_g, (MASK)(valid & CMP(x, BETTER_BOUND, BETTER_OP)));                 \
            acc_r = ACCADD(acc_r, (MASK)(valid & CMP(x, REACHED_BOUND, REACHED_OP)));               \
            if (NAN) acc_n = ACCADD(acc_n, (MASK)(valid & CMP(x, x, _CMP_UNORD_Q)));                \
        }                                                                                           \
        const __m512i held = SUB(acc_r, acc_g);                                                     \
        if (out && CMPI(held, held_before))                                                         \
            RECORD_INSIDE(T, row, first, last, low, high, start, out, fill, capacity)               \
        held_before = held;                                                                         \
    }

/* A vector scan's loop in each of its four forms (lower or higher is better; NaN checked or not):
 * LOOP takes the scan's own arguments, then the operator and bound of "beyond", of "reached", and
 * whether to count NaNs (lo, hi, lower_is_better and check_nan: the row function's). */
#define SCAN_FOUR_WAYS(LOOP, ...)                                                                   \
    if (lower_is_better && check_nan) {                                                             \
        LOOP(__VA_ARGS__, _CMP_LT_OQ, lo, _CMP_LE_OQ, hi, 1)                                        \
    } else if (lower_is_better) {                                                                   \
        LOOP(__VA_ARGS__, _CMP_LT_OQ, lo, _CMP_LE_OQ, hi, 0)                                        \
    } else if (check_nan) {                                                                         \
        LOOP(__VA_ARGS__, _CMP_GT_OQ, hi, _CMP_GE_OQ, lo, 1)                                        \
    } else {                                                                                        \
        LOOP(__VA_ARGS__, _CMP_GT_OQ, hi, _CMP_GE_OQ, lo, 0)                                        \
    }

#define SCAN_ROW_AVX512(NAME, T, VEC, LANES, MASK, SETONE, LOADU, MASKZ_LOADU, CMP, CMPI, SUB, ACCADD, ACCSUM) \
    __attribute__((target("avx512f"))) static void NAME(                                           \
        const T *row, int64_t width, T low, T high, int lower_is_better, int check_nan, int64_t start, \
        int64_t *out, int64_t *fill, int64_t capacity, int64_t *g_out, int64_t *e_out, int64_t *n_out) \
    {                                                                                               \
        const VEC lo = SETONE(low), hi = SETONE(high);                                              \
        __m512i acc_g = _mm512_setzero_si512(), acc_r = _mm512_setzero_si512();                     \
        __m512i acc_n = _mm512_setzero_si512(), held_before = _mm512_setzero_si512();               \
        SCAN_FOUR_WAYS(SCAN_LOOP_AVX512, T, VEC, LANES, MASK, LOADU, MASKZ_LOADU, CMP, CMPI, SUB, ACCADD) \
        *g_out = ACCSUM(acc_g);                                                                     \
        *e_out = ACCSUM(acc_r) - *g_out;                                                            \
        *n_out = ACCSUM(acc_n);                                                                     \
    }

/* float: 16 lanes of int32 counters; double: 8 lanes of int64 */
__attribute__((target("avx512f"))) static inline __m512i add_ones_epi32(__m512i acc, __mmask16 mask)
{
    return _mm512_mask_add_epi32(acc, mask, acc, _mm512_set1_epi32(1));
}
__attribute__((target("avx512f"))) static inline __m512i add_ones_epi64(__m512i acc, __mmask8 mask)
{
    return _mm512_mask_add_epi64(acc, mask, acc, _mm512_set1_epi64(1));
}
__attribute__((target("avx512f"))) static inline int64_t sum_epi32(__m512i acc)
{
    return (int64_t)_mm512_reduce_add_epi32(acc);
}
__attribute__((target("avx512f"))) static inline int64_t sum_epi64(__m512i acc)
{
    return (int64_t)_mm512_reduce_add_epi64(acc);
}
#define CMP_PS(a, b, op) _mm512_cmp_ps_mask(a, b, op)
#define CMP_PD(a, b, op) _mm512_cmp_pd_mask(a, b, op)
#define DIFFER_EPI32(a, b) _mm512_cmpneq_epi32_mask(a, b)
#define DIFFER_EPI64(a, b) _mm512_cmpneq_epi64_mask(a, b)

SCAN_ROW_AVX512(scan_row_f32_avx512, float, __m512, 16, __mmask16, _mm512_set1_ps, _mm512_loadu_ps,
                _mm512_maskz_loadu_ps, CMP_PS, DIFFER_EPI32, _mm512_sub_epi32, add_ones_epi32, sum_epi32)
SCAN_ROW_AVX512(scan_row_f64_avx512, double, __m512d, 8, __mmask8, _mm512_set1_pd, _mm512_loadu_pd,
                _mm512_maskz_loadu_pd, CMP_PD, DIFFER_EPI64, _mm512_sub_epi64, add_ones_epi64, sum_epi64)
#endif

/* AVX2 scans (x86-64 CPUs without AVX-512: most AMD servers and many cloud machines): the same
 * counts as the portable scan, eight float or four double lanes at a time. A compare gives all
 * ones (-1) in a lane that holds, so subtracting it adds one to that lane's counter; the row's
 * last partial vector is loaded under a lane mask (the lanes past the row read as zero and are
 * masked out of every count). */
#ifdef HAVE_AVX512_SCAN
#define HAVE_AVX2_SCAN 1

#define SCAN_LOOP_AVX2(T, VEC, LANES, LOADU, MASKLOAD, CMP, CAST, SUB, BETTER_OP, BETTER_BOUND, REACHED_OP, \
                       REACHED_BOUND, NAN)                                                          \
    for (int64_t first = 0; first < width; first += SPAN) {                                         \
        const int64_t last = first + SPAN < width ? first + SPAN : width;                           \
        int64_t j = first;                                                                          \
        for (; j + LANES <= last; j += LANES) {                                                     \
            const VEC x = LOADU(row + j);                                                           \
            acc_g = SUB(acc_g, CAST(CMP(x, BETTER_BOUND, BETTER_OP)));                              \
            acc_r = SUB(acc_r, CAST(CMP(x, REACHED_BOUND, REACHED_OP)));                            \
            if (NAN) acc_n = SUB(acc_n, CAST(CMP(x, x, _CMP_UNORD_Q)));                             \
        }                                                                                           \
        if (j < last) {                                                                             \
            const __m256i valid = TAIL_MASK(last - j);                                              \
            const VEC x = MASKLOAD(row + j, valid);                                                 \
            acc_g = SUB(acc_g, _mm256_and_si256(valid, CAST(CMP(x, BETTER_BOUND, BETTER_OP))));     \
            acc_r = SUB(acc_r, _mm256_and_si256(valid, CAST(CMP(x, REACHED_BOUND, REACHED_OP))));   \
            if (NAN) acc_n = SUB(acc_n, _mm256_and_si256(valid, CAST(CMP(x, x, _CMP_UNORD_Q))));    \
        }                                                                                           \
        const __m256i held = SUB(acc_r, acc_g);                                                     \
        if (out && _mm256_movemask_epi8(_mm256_cmpeq_epi8(held, held_before)) != -1)                \
            RECORD_INSIDE(T, row, first, last, low, high, start, out, fill, capacity)               \
        held_before = held;                                                                         \
    }

#define SCAN_ROW_AVX2(NAME, T, VEC, LANES, SETONE, LOADU, MASKLOAD, CMP, CAST, SUB, ACCSUM)         \
    __attribute__((target("avx2"))) static void NAME(                                              \
        const T *row, int64_t width, T low, T high, int lower_is_better, int check_nan, int64_t start, \
        int64_t *out, int64_t *fill, int64_t capacity, int64_t *g_out, int64_t *e_out, int64_t *n_out) \
    {                                                                                               \
        const VEC lo = SETONE(low), hi = SETONE(high);                                              \
        __m256i acc_g = _mm256_setzero_si256(), acc_r = _mm256_setzero_si256();                     \
        __m256i acc_n = _mm256_setzero_si256(), held_before = _mm256_setzero_si256();               \
        SCAN_FOUR_WAYS(SCAN_LOOP_AVX2, T, VEC, LANES, LOADU, MASKLOAD, CMP, CAST, SUB)             \
        *g_out = ACCSUM(acc_g);                                                                     \
        *e_out = ACCSUM(acc_r) - *g_out;                                                            \
        *n_out = ACCSUM(acc_n);                                                                     \
    }

/* the first n lanes all ones: float lanes are 32 bits, double lanes 64 */
__attribute__((target("avx2"))) static inline __m256i tail_mask_epi32(int64_t n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
__attribute__((target("avx2"))) static inline __m256i tail_mask_epi64(int64_t n)
{
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3));
}
__attribute__((target("avx2"))) static inline int64_t sum256_epi32(__m256i acc)
{
    int32_t lanes[8];
    _mm256_storeu_si256((__m256i *)lanes, acc);
    int64_t total = 0;
    for (int k = 0; k < 8; ++k) total += lanes[k];
    return total;
}
__attribute__((target("avx2"))) static inline int64_t sum256_epi64(__m256i acc)
{
    int64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, acc);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
#define CMP256_PS(a, b, op) _mm256_cmp_ps(a, b, op)
#define CMP256_PD(a, b, op) _mm256_cmp_pd(a, b, op)
#define MASKLOAD_PS(p, m) _mm256_maskload_ps(p, m)
#define MASKLOAD_PD(p, m) _mm256_maskload_pd(p, m)

#define TAIL_MASK(n) tail_mask_epi32(n)
SCAN_ROW_AVX2(scan_row_f32_avx2, float, __m256, 8, _mm256_set1_ps, _mm256_loadu_ps, MASKLOAD_PS, CMP256_PS,
              _mm256_castps_si256, _mm256_sub_epi32, sum256_epi32)
#undef TAIL_MASK
#define TAIL_MASK(n) tail_mask_epi64(n)
SCAN_ROW_AVX2(scan_row_f64_avx2, double, __m256d, 4, _mm256_set1_pd, _mm256_loadu_pd, MASKLOAD_PD, CMP256_PD,
              _mm256_castpd_si256, _mm256_sub_epi64, sum256_epi64)
#undef TAIL_MASK
#endif

/* -1: not chosen yet; 0: the portable scan; 1: AVX-512; 2: AVX2 */
static int scan_isa = -1;
static int best_isa = -1;

static int best_scan(void)
{
    if (best_isa < 0) {
#ifdef HAVE_AVX512_SCAN
        __builtin_cpu_init();
        best_isa = __builtin_cpu_supports("avx512f") ? 1 : __builtin_cpu_supports("avx2") ? 2 : 0;
#else
        best_isa = 0;
#endif
    }
    return best_isa;
}

static int chosen_isa(void)
{
    if (scan_isa < 0) scan_isa = best_scan();
    return scan_isa;
}

/* Which scan the chunk count uses: 0 the portable one, 1 AVX-512, 2 AVX2, each only where the
 * CPU has it (an AVX-512 CPU has AVX2 too; tests force each one it has and compare them);
 * returns the one now in use. A negative value only asks. */
int openbench_chunk_scan(int isa)
{
    if (isa >= 0) {
        const int best = best_scan();
        scan_isa = isa == 0 ? 0 : isa == 1 ? (best == 1 ? 1 : 0) : (best != 0 ? 2 : 0);
    }
    return chosen_isa();
}

#define COUNT_CHUNK(NAME, T, SCAN, SCAN_AVX512, SCAN_AVX2)                                                    \
    void NAME(T *scores, int64_t stride, int64_t width, int64_t start, int64_t row_begin,          \
              int64_t row_end, const T *lows, const T *highs, int lower_is_better, int window,      \
              const int64_t *true_ids, const T *true_scores, const int64_t *known_offsets,          \
              const int64_t *known_cols, int64_t *better, int64_t *inside, int64_t *nans,           \
              uint8_t *true_differs, int64_t *positions, int64_t *fill, int64_t capacity)           \
    {                                                                                               \
        const T worst = lower_is_better ? (T)INFINITY : (T)-INFINITY;                               \
        const int avx512 = chosen_isa();                                                            \
        for (int64_t i = row_begin; i < row_end; ++i) {                                             \
            T *row = scores + i * stride;                                                           \
            const T low = lows[i], high = highs[i];                                                 \
            int64_t minus_g = 0, minus_e = 0, hidden_nan = 0;                                       \
            const int64_t known_first = lower_bound_i64(known_cols, known_offsets[i],               \
                                                        known_offsets[i + 1], start);               \
            const int64_t known_last = lower_bound_i64(known_cols, known_first, known_offsets[i + 1], \
                                                       start + width);                              \
            const int64_t true_local = true_ids[i] - start;                                         \
            const int true_here = true_local >= 0 && true_local < width;                            \
            if (true_here && true_differs) true_differs[i] = row[true_local] != true_scores[i];     \
            for (int64_t k = known_first - (true_here ? 1 : 0); k < known_last; ++k) {              \
                const int64_t column = k < known_first ? true_local : known_cols[k] - start;        \
                T value = row[column];                                                              \
                if (window) {                                                                       \
                    hidden_nan += value != value;                                                   \
                    row[column] = value = worst;                                                    \
                }                                                                                   \
                minus_g += lower_is_better ? value < low : value > high;                            \
                minus_e += (value >= low) & (value <= high);                                        \
            }                                                                                       \
            int64_t g, e, n;                                                                        \
            /* a point window's inside candidates are exact ties: nothing to record */           \
            int64_t *out = positions && low != high ? positions + i * capacity : 0;                 \
            int64_t *row_fill = out ? fill + i : 0;                                                 \
            if (avx512 == 1) SCAN_AVX512(row, width, low, high, lower_is_better, nans != 0, start,  \
                                         out, row_fill, capacity, &g, &e, &n);                      \
            else if (avx512 == 2) SCAN_AVX2(row, width, low, high, lower_is_better, nans != 0, start, \
                                            out, row_fill, capacity, &g, &e, &n);                   \
            else SCAN(row, width, low, high, lower_is_better, nans != 0, start, out, row_fill,      \
                      capacity, &g, &e, &n);                                                        \
            better[i] += g - minus_g;                                                               \
            inside[i] += e - minus_e;                                                               \
            if (nans) nans[i] += n + hidden_nan;                                                    \
        }                                                                                           \
    }

#ifdef HAVE_AVX512_SCAN
COUNT_CHUNK(openbench_count_chunk_f32, float, scan_row_f32, scan_row_f32_avx512, scan_row_f32_avx2)
COUNT_CHUNK(openbench_count_chunk_f64, double, scan_row_f64, scan_row_f64_avx512, scan_row_f64_avx2)
#else
COUNT_CHUNK(openbench_count_chunk_f32, float, scan_row_f32, scan_row_f32, scan_row_f32)
COUNT_CHUNK(openbench_count_chunk_f64, double, scan_row_f64, scan_row_f64, scan_row_f64)
#endif

/* ------------------------------------------------------------------------------------------
 * One pass over a candidate table (rows row_begin .. row_end - 1) for everything the evaluation
 * needs of it once: each row's norms (as openbench_row_norms: sqrt of the sum of squares plus
 * width * 2^-1074, and the sum of magnitudes, in float64, the same partial sums in the same
 * order), the largest magnitude (NaN if a value is NaN) and the fewest binary fraction digits of
 * every value (as openbench_fraction_bits; -1 when a value is not finite). The caller splits the
 * rows over threads and combines the per-range maxima.
 */
/* openbench_fraction_bits_f32 on 16 values at a time (AVX-512F and CD: the trailing zeros of a
 * significand are 31 minus the leading zeros of its lowest set bit), used by the table summary
 * where the chunk count's AVX-512 scan is chosen and the CPU has AVX-512CD. */
#ifdef HAVE_AVX512_SCAN
__attribute__((target("avx512f,avx512cd"))) static int64_t fraction_bits_f32_avx512(const float *values,
                                                                                    int64_t count)
{
    const __m512i exponent_mask = _mm512_set1_epi32(0xFF), fraction_mask = _mm512_set1_epi32(0x7FFFFF);
    const __m512i implicit = _mm512_set1_epi32(0x800000), one = _mm512_set1_epi32(1);
    const __m512i top = _mm512_set1_epi32(150 + 31), zero = _mm512_setzero_si512();
    __m512i best = zero;
    __mmask16 bad = 0;
    for (int64_t j = 0; j < count; j += 16) {
        const int64_t left = count - j;
        const __mmask16 valid = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        const __m512i u = _mm512_maskz_loadu_epi32(valid, values + j);
        const __m512i exponent = _mm512_and_si512(_mm512_srli_epi32(u, 23), exponent_mask);
        bad |= _mm512_mask_cmpeq_epi32_mask(valid, exponent, exponent_mask);
        const __mmask16 normal = _mm512_cmpneq_epi32_mask(exponent, zero);
        const __m512i significand = _mm512_mask_or_epi32(_mm512_and_si512(u, fraction_mask), normal,
                                                         _mm512_and_si512(u, fraction_mask), implicit);
        const __mmask16 nonzero = _mm512_mask_cmpneq_epi32_mask(valid, significand, zero);
        const __m512i lowest = _mm512_and_si512(significand, _mm512_sub_epi32(zero, significand));
        /* 150 - max(E, 1) - (31 - lzcnt(lowest)) */
        const __m512i digits = _mm512_sub_epi32(_mm512_add_epi32(_mm512_sub_epi32(top, _mm512_max_epi32(exponent, one)),
                                                                 _mm512_lzcnt_epi32(lowest)),
                                                _mm512_set1_epi32(62));
        best = _mm512_mask_max_epi32(best, nonzero, best, digits);
    }
    if (bad) return -1;
    return (int64_t)_mm512_reduce_max_epi32(best);
}
#endif

static int vector_bits = -1;

static int64_t fraction_bits_f32_chosen(const float *values, int64_t count)
{
#ifdef HAVE_AVX512_SCAN
    if (vector_bits < 0) {
        __builtin_cpu_init();
        vector_bits = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd");
    }
    if (vector_bits && chosen_isa() == 1) return fraction_bits_f32_avx512(values, count);
#endif
    return openbench_fraction_bits_f32(values, count);
}

/* One row's norm terms as NORM_TERM sums them (partial sums 0..3 over the coordinates k mod 4,
 * each in order, then the tail into sum 0), the four partial sums in one vector register (AVX):
 * the same additions in the same order, so the same bits as the portable loop. */
#ifdef HAVE_AVX512_SCAN
#define ROW_NORMS_AVX(NAME, T, LOAD4)                                                               \
    __attribute__((target("avx2"))) static void NAME(const T *c, int64_t width, double *sums)      \
    {                                                                                               \
        __m256d sq = _mm256_setzero_pd(), ab = _mm256_setzero_pd();                                 \
        const __m256d sign = _mm256_set1_pd(-0.0);                                                  \
        int64_t k = 0;                                                                              \
        for (; k + 4 <= width; k += 4) {                                                            \
            const __m256d x = LOAD4(c + k);                                                         \
            sq = _mm256_add_pd(sq, _mm256_mul_pd(x, x));                                            \
            ab = _mm256_add_pd(ab, _mm256_andnot_pd(sign, x));                                      \
        }                                                                                           \
        double lanes_sq[4], lanes_ab[4];                                                            \
        _mm256_storeu_pd(lanes_sq, sq);                                                             \
        _mm256_storeu_pd(lanes_ab, ab);                                                             \
        for (; k < width; ++k) {                                                                    \
            const double x = (double)c[k];                                                          \
            lanes_sq[0] += x * x;                                                                   \
            lanes_ab[0] += fabs(x);                                                                 \
        }                                                                                           \
        sums[0] = (lanes_sq[0] + lanes_sq[1]) + (lanes_sq[2] + lanes_sq[3]);                        \
        sums[1] = (lanes_ab[0] + lanes_ab[1]) + (lanes_ab[2] + lanes_ab[3]);                        \
    }
#define LOAD4_F32(p) _mm256_cvtps_pd(_mm_loadu_ps(p))
#define LOAD4_F64(p) _mm256_loadu_pd(p)
ROW_NORMS_AVX(row_norms_f32_avx, float, LOAD4_F32)
ROW_NORMS_AVX(row_norms_f64_avx, double, LOAD4_F64)
#endif

#define ROW_NORMS_PORTABLE(NAME, T)                                                                 \
    static void NAME(const T *c, int64_t width, double *sums)                                       \
    {                                                                                               \
        double sq0 = 0.0, sq1 = 0.0, sq2 = 0.0, sq3 = 0.0;                                          \
        double ab0 = 0.0, ab1 = 0.0, ab2 = 0.0, ab3 = 0.0;                                          \
        int64_t k = 0;                                                                              \
        for (; k + 4 <= width; k += 4) {                                                            \
            NORM_TERM(k, 0) NORM_TERM(k + 1, 1) NORM_TERM(k + 2, 2) NORM_TERM(k + 3, 3)             \
        }                                                                                           \
        for (; k < width; ++k) NORM_TERM(k, 0)                                                      \
        sums[0] = (sq0 + sq1) + (sq2 + sq3);                                                        \
        sums[1] = (ab0 + ab1) + (ab2 + ab3);                                                        \
    }
ROW_NORMS_PORTABLE(row_norms_f32_portable, float)
ROW_NORMS_PORTABLE(row_norms_f64_portable, double)

#ifdef HAVE_AVX512_SCAN
static int vector_norms = -1;

#define ROW_NORMS_CHOSEN(NAME, PORTABLE, VECTOR, T)                                                 \
    static void NAME(const T *c, int64_t width, double *sums)                                       \
    {                                                                                               \
        if (vector_norms < 0) {                                                                     \
            __builtin_cpu_init();                                                                   \
            vector_norms = __builtin_cpu_supports("avx2");                                          \
        }                                                                                           \
        if (vector_norms && chosen_isa() != 0) VECTOR(c, width, sums);                              \
        else PORTABLE(c, width, sums);                                                              \
    }
ROW_NORMS_CHOSEN(row_norms_f32_chosen, row_norms_f32_portable, row_norms_f32_avx, float)
ROW_NORMS_CHOSEN(row_norms_f64_chosen, row_norms_f64_portable, row_norms_f64_avx, double)
#else
#define row_norms_f32_chosen row_norms_f32_portable
#define row_norms_f64_chosen row_norms_f64_portable
#endif

#define TABLE_SUMMARY(NAME, T, U, ABS_BITS, INF_BITS, BITS_OF, NORMS_OF)                                     \
    void NAME(const T *table, int64_t stride, int64_t width, int64_t row_begin, int64_t row_end,   \
              double *norm2, double *norm1, double *largest, int64_t *bits)                         \
    {                                                                                               \
        U most_bits = 0;                                                                            \
        int64_t digits = 0, nan_seen = 0;                                                           \
        for (int64_t p = row_begin; p < row_end; ++p) {                                             \
            const T *c = table + p * stride;                                                        \
            double sums[2];                                                                         \
            NORMS_OF(c, width, sums);                                                               \
            norm2[p] = sqrt(sums[0] + (double)width * SUBNORMAL_MIN);                               \
            norm1[p] = sums[1];                                                                     \
            int64_t k;                                                                              \
            /* the largest magnitude from the bit patterns: |x| ordered as unsigned integers, NaN   \
               above infinity's pattern (an integer maximum vectorises; a float one would not) */  \
            const U *pattern = (const U *)c;                                                        \
            U row_most = 0;                                                                         \
            for (k = 0; k < width; ++k) {                                                           \
                const U magnitude = pattern[k] & ABS_BITS;                                          \
                row_most = magnitude > row_most ? magnitude : row_most;                             \
            }                                                                                       \
            if (row_most > INF_BITS) nan_seen = 1;                                                  \
            else if (row_most > most_bits) most_bits = row_most;                                    \
            if (digits >= 0) {                                                                      \
                const int64_t row_digits = BITS_OF(c, width);                                       \
                digits = row_digits < 0 ? -1 : (row_digits > digits ? row_digits : digits);         \
            }                                                                                       \
        }                                                                                           \
        T most;                                                                                     \
        memcpy(&most, &most_bits, sizeof most);                                                     \
        *largest = nan_seen ? NAN : (double)most;                                                   \
        *bits = digits;                                                                             \
    }

TABLE_SUMMARY(openbench_table_summary_f32, float, uint32_t, 0x7FFFFFFFu, 0x7F800000u, fraction_bits_f32_chosen,
              row_norms_f32_chosen)
TABLE_SUMMARY(openbench_table_summary_f64, double, uint64_t, 0x7FFFFFFFFFFFFFFFull, 0x7FF0000000000000ull,
              openbench_fraction_bits_f64, row_norms_f64_chosen)

/* The drug × disease matrix of the repurposing task (matrix.py): one block of fast keys against
 * T thresholds sorted ascending, each with a window [lows[t], highs[t]] (lows and highs both
 * non-decreasing). For every key x of the block:
 *
 *   a = #{t : highs[t] < x}   the thresholds x is beyond (better than, in exact arithmetic)
 *   b = #{t : lows[t] <= x}   the thresholds x is not below
 *
 * and the caller's histograms of T + 1 counters get beyond[a] += 1 and reached[b] += 1 (their
 * suffix sums give, per threshold, the keys beyond it and the keys reaching it). A key with a < b
 * lies inside the windows of thresholds a .. b - 1: with `queries64` given (exact ranks' second
 * step), it is recomputed in float64 from the block's float64 query row and its stored column
 * (kind 0: dot product, 1: -squared L2 distance, 2: -L1 distance) and placed again among the
 * float64 windows [keys64_lo[t], keys64_hi[t]]; a key still undecided is recorded as three values
 * (its position row * width + column, a, b), up to `capacity` (the return value counts them all).
 * Without `record` nothing is recorded (point windows: inside means tied).
 *
 * The counts come from a grid of `cells` equal cells over the thresholds' span: x falls in cell
 * c = floor((x - base) * scale) (in the keys' precision: off by at most cells * 2^-23 cells), clamped
 * to -1 (below every window) .. cells (above). The tables are per cell c + 1: `codes` (0 when the cell
 * is pure: every key this arithmetic can put in cell c (matrix.py's grid_margin) has the same a and b,
 * and, recording, a == b; else
 * -1 - k), `ab` (the ranges [ab[4k], ab[4k + 1]) of highs and [ab[4k + 2], ab[4k + 3]) of lows a
 * key can fall between: a pure cell's a and b), `impure` (row k: the ranges of the k-th impure
 * cell). The counters `cell_counts` (cells + 2, int32, rows * width < 2^31) start from the codes: a
 * key of a pure cell is one load of its counter and one increment (the common case, no other
 * table read); a negative counter names the impure cell's ranges. The pure cells' counts go to
 * the histograms at the end. The keys are visited MATRIX_SPAN columns at a time, every row of
 * the part within them, so that the float64 step finds its stored columns in cache. With `tops`, the positions of the
 * keys >= `floor` are written there too (their number in *top_count, the first `top_capacity`
 * kept). Returns the keys recorded, or -1 - the position of a NaN key. Comparisons are IEEE-exact. */
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

/* The matrix pass's cells of n float keys: slot[j] = clamp((row[j] - base) * scale, -1, upper)
 * truncated, + 1, the same in every scan (a subtraction then a product: nothing to fuse; x86's
 * min and max return their second operand where the first is NaN, as the portable loop's
 * comparisons do). Returns whether a key is NaN; *high: whether a key is >= floor. */
#define MATRIX_SLOTS(NAME, T)                                                                      \
    static int NAME(const T *row, int64_t n, T base, T scale, T upper, T floor, int32_t *slot, int *high) \
    {                                                                                              \
        int nan = 0, above = 0;                                                                    \
        for (int64_t j = 0; j < n; ++j) {                                                          \
            T t = (row[j] - base) * scale;                                                         \
            t = t < upper ? t : upper;                                                             \
            t = t > (T)-1 ? t : (T)-1;                                                             \
            slot[j] = (int32_t)t + 1;                                                              \
            nan |= row[j] != row[j];                                                               \
            above |= row[j] >= floor;                                                              \
        }                                                                                          \
        *high = above;                                                                             \
        return nan;                                                                                \
    }

MATRIX_SLOTS(matrix_slots_portable, float)
MATRIX_SLOTS(matrix_slots_f64, double) /* the float64 pass's cells: one loop for every CPU */

#ifdef HAVE_AVX512_SCAN
__attribute__((target("avx512f"))) static int matrix_slots_avx512(const float *row, int64_t n, float base,
                                                                  float scale, float upper, float floor,
                                                                  int32_t *slot, int *high)
{
    const __m512 vbase = _mm512_set1_ps(base), vscale = _mm512_set1_ps(scale), vupper = _mm512_set1_ps(upper);
    const __m512 vlow = _mm512_set1_ps(-1.0f), vfloor = _mm512_set1_ps(floor);
    const __m512i one = _mm512_set1_epi32(1);
    __mmask16 nan = 0, above = 0;
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 lanes = n - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - j)) - 1u);
        const __m512 x = _mm512_maskz_loadu_ps(lanes, row + j);
        const __m512 t = _mm512_max_ps(_mm512_min_ps(_mm512_mul_ps(_mm512_sub_ps(x, vbase), vscale), vupper), vlow);
        _mm512_mask_storeu_epi32(slot + j, lanes, _mm512_add_epi32(_mm512_cvttps_epi32(t), one));
        nan |= _mm512_mask_cmp_ps_mask(lanes, x, x, _CMP_UNORD_Q);
        above |= _mm512_mask_cmp_ps_mask(lanes, x, vfloor, _CMP_GE_OQ);
    }
    *high = above != 0;
    return nan != 0;
}

__attribute__((target("avx2"))) static int matrix_slots_avx2(const float *row, int64_t n, float base, float scale,
                                                             float upper, float floor, int32_t *slot, int *high)
{
    const __m256 vbase = _mm256_set1_ps(base), vscale = _mm256_set1_ps(scale), vupper = _mm256_set1_ps(upper);
    const __m256 vlow = _mm256_set1_ps(-1.0f), vfloor = _mm256_set1_ps(floor);
    const __m256i one = _mm256_set1_epi32(1);
    __m256 nan = _mm256_setzero_ps(), above = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 x = _mm256_loadu_ps(row + j);
        const __m256 t = _mm256_max_ps(_mm256_min_ps(_mm256_mul_ps(_mm256_sub_ps(x, vbase), vscale), vupper), vlow);
        _mm256_storeu_si256((__m256i *)(void *)(slot + j), _mm256_add_epi32(_mm256_cvttps_epi32(t), one));
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
        above = _mm256_or_ps(above, _mm256_cmp_ps(x, vfloor, _CMP_GE_OQ));
    }
    int rest_high = 0;
    const int rest_nan = matrix_slots_portable(row + j, n - j, base, scale, upper, floor, slot + j, &rest_high);
    *high = _mm256_movemask_ps(above) != 0 || rest_high;
    return _mm256_movemask_ps(nan) != 0 || rest_nan;
}
#endif

static int matrix_slots_f32(const float *row, int64_t n, float base, float scale, float upper, float floor,
                            int32_t *slot, int *high)
{
#ifdef HAVE_AVX512_SCAN
    const int isa = chosen_isa();
    if (isa == 1) return matrix_slots_avx512(row, n, base, scale, upper, floor, slot, high);
    if (isa == 2) return matrix_slots_avx2(row, n, base, scale, upper, floor, slot, high);
#endif
    return matrix_slots_portable(row, n, base, scale, upper, floor, slot, high);
}

/* One key x of the matrix pass (row i, column j, slot c): a pure cell's counter counts it;
 * otherwise it is placed among the windows of its impure cell's ranges; with `pair_terms`, those
 * windows are narrowed to the pair's own (half-width from the row's bound polynomial at the
 * column's norm, exact.py's fast_key_bound_terms, plus `pair_extra`, around the thresholds'
 * float64 `centers`; a comparison in float64 off by at most u|x - c|, which the 2^-30 margin
 * covers); a key still inside one is recomputed in float64 (`query` non-null) and placed among
 * the float64 windows, and what stays undecided is recorded by position with its range. Reads the
 * pass's own variables by name (cell_counts, impure, lows, highs, pair_terms, pair_norms,
 * centers, pair_extra, record, query, kind, columns, dims, keys64_lo, keys64_hi, pairs, capacity,
 * recorded, width, beyond, reached): the plain and the fused pass share it. KEY64: the key's
 * float64 value from the stored values; DEFER(I, J, a, b): whether the pass takes the key's
 * float64 step later (the fused pass: with its rows fetched meanwhile), MATRIX_NOW for now. */
#define MATRIX_NOW(I, J, A, B) 0
#define PLAIN_FLOAT64_KEY(IS_F32, J)                                                                \
    float64_key_of(kind, query, IS_F32 ? (const float *)(const void *)(columns + (J) * dims) : 0,  \
                   IS_F32 ? 0 : (const double *)(const void *)(columns + (J) * dims), dims)
/* A key still undecided after its float64 step (a < b) recorded by position with its range, up to
 * `capacity` (`recorded` counts them all). */
#define MATRIX_RECORD(I, J, A, B)                                                                   \
    do {                                                                                            \
        if ((A) < (B)) {                                                                            \
            if (recorded < capacity) {                                                              \
                pairs[3 * recorded] = (I) * width + (J);                                            \
                pairs[3 * recorded + 1] = (A);                                                      \
                pairs[3 * recorded + 2] = (B);                                                      \
            }                                                                                       \
            ++recorded;                                                                             \
        }                                                                                           \
    } while (0)
#define MATRIX_COUNT_KEY(T, BELOW, KEY64, DEFER, KEY, SLOT, I, J)                                  \
    do {                                                                                            \
        const int32_t c_ = (SLOT), code_ = cell_counts[c_];                                         \
        if (__builtin_expect(code_ >= 0, 1)) { cell_counts[c_] = code_ + 1; break; } /* a pure cell */ \
        const T x_ = (KEY);                                                                         \
        const int64_t *range_ = impure + 4 * (int64_t)(-1 - code_);                                 \
        int64_t a_ = BELOW(highs, range_[0], range_[1], x_, 1);                                     \
        int64_t b_ = BELOW(lows, range_[2], range_[3], x_, 0);                                      \
        if (pair_terms && a_ < b_) { /* the pair's own window: its own bound from its norms */     \
            const double norm_ = pair_norms[J], *terms_ = pair_terms + 3 * (I);                     \
            const double w_ = (((terms_[0] * norm_ + terms_[1]) * norm_ + terms_[2]) + pair_extra)  \
                              * (1.0 + 0x1p-30);                                                    \
            while (a_ < b_ && (double)x_ - centers[a_] > w_) ++a_;                                  \
            while (b_ > a_ && centers[b_ - 1] - (double)x_ > w_) --b_;                              \
        }                                                                                           \
        if (record && a_ < b_) {                                                                    \
            if (query && DEFER(I, J, a_, b_)) break; /* the float64 step later, its rows fetched */  \
            if (query) { /* float64 from the stored values */                                      \
                const double key_ = KEY64;                                                          \
                a_ = count_below_f64(keys64_hi, a_, b_, key_, 1);                                   \
                b_ = count_below_f64(keys64_lo, a_, b_, key_, 0);                                   \
            }                                                                                       \
            MATRIX_RECORD(I, J, a_, b_);                                                            \
        }                                                                                           \
        beyond[a_] += 1;                                                                            \
        reached[b_] += 1;                                                                           \
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

#define MATRIX_SPAN 128

#define MATRIX_COUNT(NAME, T, BELOW, IS_F32, SLOTS)                                                       \
    int64_t NAME(const T *keys, int64_t stride, int64_t rows, int64_t width, const T *lows,        \
                 const T *highs, int64_t count, const int32_t *codes, const int64_t *impure,         \
                 const int64_t *ab, int64_t cells, T base, T scale, int32_t *cell_counts, int64_t *beyond, int64_t *reached,         \
                 int record, int64_t *pairs, int64_t capacity, T floor, int64_t *tops,              \
                 int64_t top_capacity, int64_t *top_count, int kind, const double *queries64,       \
                 int64_t dims, const T *columns, const double *keys64_lo, const double *keys64_hi)  \
    {                                                                                               \
        int64_t recorded = 0, kept = 0;                                                             \
        const double *pair_terms = 0, *pair_norms = 0, *centers = 0, pair_extra = 0.0; /* no own windows */ \
        int32_t slot[MATRIX_SPAN];                                                                  \
        const T upper = (T)cells;                                                                   \
        for (int64_t c = 0; c < cells + 2; ++c) cell_counts[c] = codes[c];                          \
        for (int64_t first = 0; first < width; first += MATRIX_SPAN) {                              \
            const int64_t last = first + MATRIX_SPAN < width ? first + MATRIX_SPAN : width;         \
            for (int64_t i = 0; i < rows; ++i) {                                                    \
                const T *row = keys + i * stride;                                                   \
                const double *query = queries64 ? queries64 + i * dims : 0;                         \
                int high = 0;                                                                       \
                const int nan = SLOTS(row + first, last - first, base, scale, upper, floor, slot, &high); \
                if (nan) { /* the first NaN in row order, whatever the order of the pass */        \
                    for (int64_t r = 0; r < rows; ++r)                                              \
                        for (int64_t j = 0; j < width; ++j)                                         \
                            if (keys[r * stride + j] != keys[r * stride + j]) return -1 - (r * width + j); \
                }                                                                                   \
                for (int64_t j = first; j < last; ++j)                                              \
                    MATRIX_COUNT_KEY(T, BELOW, PLAIN_FLOAT64_KEY(IS_F32, j), MATRIX_NOW, row[j],         \
                                     slot[j - first], i, j);                                                \
                if (tops && high) {                                                                 \
                    for (int64_t j = first; j < last; ++j)                                          \
                        if (row[j] >= floor) {                                                      \
                            if (kept < top_capacity) tops[kept] = i * width + j;                    \
                            ++kept;                                                                 \
                        }                                                                           \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
        matrix_pure_counts(cell_counts, cells, ab, beyond, reached);                               \
        if (tops) *top_count = kept;                                                                \
        return recorded;                                                                            \
    }

MATRIX_COUNT(openbench_matrix_count_f32, float, count_below_f32, 1, matrix_slots_f32)
MATRIX_COUNT(openbench_matrix_count_f64, double, count_below_f64, 0, matrix_slots_f64)

/* The fused matrix pass (AVX-512): the keys of a part's rows against every column computed a
 * tile at a time, 6 rows by 32 columns in 12 registers, and counted while the tile is in L1, as
 * openbench_matrix_count_f32 counts a block (the same cells, windows, float64 step, records and
 * best pairs). No block of keys is written to memory and read again, and the sum's order is
 * ours: each key's dot product is summed in chunks of `chunk` dimensions, each chunk by fused
 * multiply-adds from 0, the chunks' sums added in order, so that a term goes through at most
 * chunk + ceil(dims / chunk) - 1 roundings (exact.py's bound for this pass, ~sqrt(dims) times 2
 * where a GEMM of unknown order allows dims).
 *
 * `lows` and `highs` are read up to two values past `count` (padding). `packed`: the columns in
 * panels of 32, (ceil(width / 32), dims, 32) float32, zero past width; `columns` (width, dims) the
 * same values row by row (the float64 step reads them). kind 0: the key is the dot product; 1:
 * L2, key = (2 q.c + col_terms[j]) + row_terms[i], col_terms = -|c|^2 and row_terms = -|q|^2
 * rounded to float32 (candidate_scores' order). `top_keys`: the fast keys of the best pairs
 * recorded in `tops`. `pair_terms` (rows, 3), `pair_norms` (width,), `centers` (count,) and
 * `pair_extra`: the pairs' own windows (MATRIX_COUNT_KEY; NULL: none). `cell_counts` holds cells +
 * 3 counters (the last, a spare for the places of partial tiles). Returns the keys recorded, -1
 * where a key is NaN (the caller counts the block the plain way, which names it), -2 without
 * AVX-512, -3 out of memory. */
#ifdef HAVE_AVX512_SCAN
#define FUSED_ROWS 6
#define FUSED_COLS 32
#define FUSED_GROUP 16 /* column panels per pass over the rows: 16 × 32 columns × dims floats stay in L2 */

#define FUSED_KEYS (FUSED_ROWS * FUSED_COLS)


/* The previous tile's keys counted while this one's products run: the multiply-adds keep the
 * vector unit busy and leave the load and store ports idle, so each k step also takes the next
 * `per_step` of the previous tile's cells (`prior`, FUSED_KEYS of them; a key of an impure cell
 * is only listed in `impure_at`, for the caller). A pure cell's counter is incremented without a
 * branch (an impure one's code is stored back unchanged). */
#define FUSED_COUNT_PRIOR(LIMIT)                                                                    \
    do {                                                                                            \
        const int limit_ = (LIMIT);                                                                 \
        for (; cursor < limit_; ++cursor) {                                                         \
            const int32_t c_ = prior[cursor], code_ = cell_counts[c_], pure_ = code_ >= 0;          \
            cell_counts[c_] = code_ + pure_;                                                        \
            impure_at[impure] = cursor;                                                             \
            impure += 1 - pure_;                                                                    \
        }                                                                                           \
    } while (0)

#define FUSED_DEFERRED 16 /* keys whose float64 step waits for their rows: some ten tiles' worth */

/* Fetch a deferred key's float64 query row and float32 column toward the cache. */
static inline void fused_fetch(const double *query, const float *column, int64_t dims)
{
    for (int64_t offset = 0; offset < dims * (int64_t)sizeof(double); offset += 64)
        __builtin_prefetch((const char *)query + offset, 0, 2);
    for (int64_t offset = 0; offset < dims * (int64_t)sizeof(float); offset += 64)
        __builtin_prefetch((const char *)column + offset, 0, 2);
}

/* The last tile's cells counted alone (FUSED_COUNT_PRIOR); returns the keys listed as impure. */
static int fused_count_tile(const int32_t *prior, int32_t *cell_counts, int32_t *impure_at)
{
    int cursor = 0, impure = 0;
    FUSED_COUNT_PRIOR(FUSED_KEYS);
    return impure;
}

/* The rows (rows, dims) in panels of FUSED_ROWS, (ceil(rows / 6), dims, 6): each panel holds its
 * rows' k-th values side by side, zero past `rows`; NULL out of memory (the caller frees it). */
static float *fused_row_panels(const float *queries, int64_t rows, int64_t dims)
{
    const int64_t panels = (rows + FUSED_ROWS - 1) / FUSED_ROWS;
    size_t bytes = (size_t)(panels * FUSED_ROWS * (dims > 0 ? dims : 1)) * sizeof(float);
    bytes = (bytes + 63) / 64 * 64;
    float *a = (float *)aligned_alloc(64, bytes);
    if (!a) return 0;
    for (int64_t p = 0; p < panels; ++p)
        for (int64_t k = 0; k < dims; ++k)
            for (int64_t r = 0; r < FUSED_ROWS; ++r) {
                const int64_t i = p * FUSED_ROWS + r;
                a[(p * dims + k) * FUSED_ROWS + r] = i < rows ? queries[i * dims + k] : 0.0f;
            }
    return a;
}

/* One tile's keys (see openbench_matrix_fused_f32) into `tile`; with `prior`, the previous
 * tile's cells counted on the way (FUSED_COUNT_PRIOR). Returns the number of prior keys listed
 * as impure. */
__attribute__((target("avx512f"))) static int fused_tile(const float *a, const float *b, int64_t dims,
                                                         int64_t chunk, float *tile, const int32_t *prior,
                                                         int32_t *cell_counts, int32_t *impure_at)
{
    __m512 sum[FUSED_ROWS][2], part[FUSED_ROWS][2];
    int cursor = prior ? 0 : FUSED_KEYS, impure = 0;
    const int per_step = dims > 0 ? (int)((FUSED_KEYS + dims - 1) / dims) : FUSED_KEYS;
    for (int r = 0; r < FUSED_ROWS; ++r) sum[r][0] = sum[r][1] = _mm512_setzero_ps();
    for (int64_t k0 = 0; k0 < dims; k0 += chunk) {
        const int64_t k1 = k0 + chunk < dims ? k0 + chunk : dims;
        for (int r = 0; r < FUSED_ROWS; ++r) part[r][0] = part[r][1] = _mm512_setzero_ps();
        for (int64_t k = k0; k < k1; ++k) {
            const __m512 b0 = _mm512_loadu_ps(b + k * FUSED_COLS), b1 = _mm512_loadu_ps(b + k * FUSED_COLS + 16);
            for (int r = 0; r < FUSED_ROWS; ++r) {
                const __m512 x = _mm512_set1_ps(a[k * FUSED_ROWS + r]);
                part[r][0] = _mm512_fmadd_ps(x, b0, part[r][0]);
                part[r][1] = _mm512_fmadd_ps(x, b1, part[r][1]);
            }
            FUSED_COUNT_PRIOR(cursor + per_step < FUSED_KEYS ? cursor + per_step : FUSED_KEYS);
        }
        for (int r = 0; r < FUSED_ROWS; ++r) {
            sum[r][0] = _mm512_add_ps(sum[r][0], part[r][0]);
            sum[r][1] = _mm512_add_ps(sum[r][1], part[r][1]);
        }
    }
    FUSED_COUNT_PRIOR(FUSED_KEYS);
    for (int r = 0; r < FUSED_ROWS; ++r) {
        _mm512_store_ps(tile + r * FUSED_COLS, sum[r][0]);
        _mm512_store_ps(tile + r * FUSED_COLS + 16, sum[r][1]);
    }
    return impure;
}

/* A tile's keys finished (L2: (2 t + col_terms[j]) + row_terms[i], candidate_scores' order) and
 * their cells, as matrix_slots_avx512 computes them, for its first `rows_here` rows and `n`
 * columns (row r's at slot + 32 r); every other place of the tile gets the spare cell `spare`
 * (counted, never read). Returns whether a key is NaN; high[r]: a bit for each key of row r >=
 * floor. */
__attribute__((target("avx512f"))) static int fused_tile_slots(float *tile, int64_t rows_here, int64_t n, int kind,
                                                               const float *col_terms, const float *row_terms,
                                                               float base, float scale, float upper, float floor,
                                                               int32_t spare, int32_t *slot, uint32_t *high)
{
    const __m512i spares = _mm512_set1_epi32(spare);
    /* high[r]: a bit for each key of row r at or above the floor */
    const __m512 vbase = _mm512_set1_ps(base), vscale = _mm512_set1_ps(scale), vupper = _mm512_set1_ps(upper);
    const __m512 vlow = _mm512_set1_ps(-1.0f), vfloor = _mm512_set1_ps(floor);
    const __m512i one = _mm512_set1_epi32(1);
    const __mmask16 halves[2] = {n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u),
                                 n >= 32 ? (__mmask16)0xFFFF : n > 16 ? (__mmask16)((1u << (n - 16)) - 1u) : 0};
    __m512 terms[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    if (kind == 1) {
        terms[0] = _mm512_maskz_loadu_ps(halves[0], col_terms);
        terms[1] = _mm512_maskz_loadu_ps(halves[1], col_terms + 16);
    }
    __mmask16 nan = 0;
    for (int64_t r = rows_here; r < FUSED_ROWS; ++r) {
        _mm512_storeu_si512(slot + r * FUSED_COLS, spares);
        _mm512_storeu_si512(slot + r * FUSED_COLS + 16, spares);
        high[r] = 0;
    }
    for (int64_t r = 0; r < rows_here; ++r) {
        high[r] = 0;
        for (int h = 0; h < 2; ++h) {
            const __mmask16 lanes = halves[h];
            float *at = tile + r * FUSED_COLS + 16 * h;
            __m512 x = _mm512_maskz_loadu_ps(lanes, at);
            if (kind == 1) {
                x = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(x, x), terms[h]), _mm512_set1_ps(row_terms[r]));
                _mm512_mask_storeu_ps(at, lanes, x);
            }
            const __m512 t = _mm512_max_ps(_mm512_min_ps(_mm512_mul_ps(_mm512_sub_ps(x, vbase), vscale), vupper), vlow);
            const __m512i cell = _mm512_add_epi32(_mm512_cvttps_epi32(t), one);
            _mm512_storeu_si512(slot + r * FUSED_COLS + 16 * h, _mm512_mask_mov_epi32(spares, lanes, cell));
            nan |= _mm512_mask_cmp_ps_mask(lanes, x, x, _CMP_UNORD_Q); /* the caller names the NaN */
            high[r] |= (uint32_t)_mm512_mask_cmp_ps_mask(lanes, x, vfloor, _CMP_GE_OQ) << (16 * h);
        }
    }
    return nan != 0;
}
#endif

int openbench_matrix_fused_available(void)
{
#ifdef HAVE_AVX512_SCAN
    return chosen_isa() == 1;
#else
    return 0;
#endif
}

/* The fused pass's keys themselves, (rows, width) row by row into `out`, by the same tiles and
 * the same finishing (the tests hold them to the order of sums the bound assumes). Returns 0, -2
 * without AVX-512, -3 out of memory. */
#ifdef HAVE_AVX512_SCAN
__attribute__((target("avx512f")))
#endif
int64_t openbench_matrix_fused_keys_f32(const float *queries, int64_t rows, const float *packed, int64_t width,
                                        int64_t dims, int64_t chunk, const float *row_terms, const float *col_terms,
                                        int kind, float *out)
{
#ifdef HAVE_AVX512_SCAN
    if (chosen_isa() != 1) return -2;
    if (chunk < 1) chunk = 1;
    float tile[FUSED_ROWS * FUSED_COLS] __attribute__((aligned(64)));
    int32_t slot[FUSED_ROWS * FUSED_COLS] __attribute__((aligned(64)));
    float *a = fused_row_panels(queries, rows, dims);
    if (!a) return -3;
    for (int64_t p = 0; p * FUSED_ROWS < rows; ++p) {
        const int64_t rows_here = rows - p * FUSED_ROWS < FUSED_ROWS ? rows - p * FUSED_ROWS : FUSED_ROWS;
        const float *panel = a + p * FUSED_ROWS * dims;
        for (int64_t q = 0; q * FUSED_COLS < width; ++q) {
            const int64_t j0 = q * FUSED_COLS, n = width - j0 < FUSED_COLS ? width - j0 : FUSED_COLS;
            uint32_t high[FUSED_ROWS];
            fused_tile(panel, packed + q * FUSED_COLS * dims, dims, chunk, tile, 0, 0, 0);
            fused_tile_slots(tile, rows_here, n, kind, kind == 1 ? col_terms + j0 : 0,
                             kind == 1 ? row_terms + p * FUSED_ROWS : 0, 0.0f, 1.0f, 1.0f, 0.0f, 0, slot, high);
            for (int64_t r = 0; r < rows_here; ++r)
                for (int64_t jj = 0; jj < n; ++jj) out[(p * FUSED_ROWS + r) * width + j0 + jj] = tile[r * FUSED_COLS + jj];
        }
    }
    free(a);
    return 0;
#else
    (void)queries; (void)rows; (void)packed; (void)width; (void)dims; (void)chunk; (void)row_terms; (void)col_terms;
    (void)kind; (void)out;
    return -2;
#endif
}

#ifdef HAVE_AVX512_SCAN
__attribute__((target("avx512f")))
#endif
int64_t openbench_matrix_fused_f32(const float *queries, int64_t rows, const float *packed, const float *columns,
                                   int64_t width, int64_t dims, int64_t chunk, const float *row_terms,
                                   const float *col_terms, const float *lows, const float *highs, int64_t count,
                                   const int32_t *codes, const int64_t *impure, const int64_t *ab, int64_t cells,
                                   float base, float scale, int32_t *cell_counts, int64_t *beyond, int64_t *reached,
                                   int record, int64_t *pairs, int64_t capacity, float floor, int64_t *tops,
                                   float *top_keys, int64_t top_capacity, int64_t *top_count, int kind,
                                   const double *queries64, const double *keys64_lo, const double *keys64_hi,
                                   const double *pair_terms, const double *pair_norms, const double *centers,
                                   double pair_extra)
{
#ifdef HAVE_AVX512_SCAN
    (void)count;
    if (chosen_isa() != 1) return -2;
    if (chunk < 1) chunk = 1;
    const int64_t panels = (rows + FUSED_ROWS - 1) / FUSED_ROWS;
    const int64_t column_panels = (width + FUSED_COLS - 1) / FUSED_COLS;
    float *a = fused_row_panels(queries, rows, dims);
    if (!a) return -3;
    for (int64_t c = 0; c < cells + 2; ++c) cell_counts[c] = codes[c];
    const int32_t spare = (int32_t)(cells + 2); /* the places of a partial tile outside the matrix count here */
    cell_counts[spare] = 0;
    int64_t recorded = 0, kept = 0, prior_i0 = 0, prior_j0 = 0;
    const float upper = (float)cells;
    float tiles[2][FUSED_KEYS] __attribute__((aligned(64)));
    int32_t slots[2][FUSED_KEYS] __attribute__((aligned(64)));
    int32_t impure_at[FUSED_KEYS];
    int prior = -1; /* the buffer of the tile whose cells the next tile's products count, -1: none */
    /* keys inside a pair's window wait here for their float64 step, their query row and column
     * fetched meanwhile (each step otherwise waits on some 40 lines from L3) */
    int64_t deferred_pair[FUSED_DEFERRED][2], deferred_range[FUSED_DEFERRED][2];
    int deferred = 0;
#define FUSED_DEFER(I, J, A, B)                                                                     \
    ({                                                                                              \
        if (deferred == FUSED_DEFERRED) FUSED_FLUSH();                                              \
        deferred_pair[deferred][0] = (I); deferred_pair[deferred][1] = (J);                         \
        deferred_range[deferred][0] = (A); deferred_range[deferred][1] = (B);                       \
        fused_fetch(queries64 + (I) * dims, columns + (J) * dims, dims);                            \
        ++deferred;                                                                                 \
        1;                                                                                          \
    })
#define FUSED_FLUSH()                                                                               \
    do {                                                                                            \
        for (int d_ = 0; d_ < deferred; ++d_) {                                                     \
            const int64_t i_ = deferred_pair[d_][0], j_ = deferred_pair[d_][1];                     \
            const double key_ = float64_key_of(kind, queries64 + i_ * dims, columns + j_ * dims, 0, dims); \
            int64_t a_ = count_below_f64(keys64_hi, deferred_range[d_][0], deferred_range[d_][1], key_, 1); \
            int64_t b_ = count_below_f64(keys64_lo, a_, deferred_range[d_][1], key_, 0);            \
            MATRIX_RECORD(i_, j_, a_, b_);                                                          \
            beyond[a_] += 1;                                                                        \
            reached[b_] += 1;                                                                       \
        }                                                                                           \
        deferred = 0;                                                                               \
    } while (0)
/* the prior tile's keys of impure cells, placed one by one (MATRIX_COUNT_KEY reads their codes) */
#define FUSED_SETTLE(LISTED)                                                                        \
    for (int t_ = 0; t_ < (LISTED); ++t_) {                                                         \
        const int at_ = impure_at[t_];                                                              \
        const int64_t i = prior_i0 + (at_ >> 5), j = prior_j0 + (at_ & 31);                         \
        const double *query = queries64 ? queries64 + i * dims : 0;                                 \
        MATRIX_COUNT_KEY(float, count_below_padded_f32, PLAIN_FLOAT64_KEY(1, j), FUSED_DEFER,        \
                         tiles[prior][at_], slots[prior][at_], i, j);                                   \
    }
    for (int64_t g = 0; g < column_panels; g += FUSED_GROUP) {
        const int64_t g_end = g + FUSED_GROUP < column_panels ? g + FUSED_GROUP : column_panels;
        for (int64_t p = 0; p < panels; ++p) {
            for (int64_t q = g; q < g_end; ++q) {
                const int current = prior == 0 ? 1 : 0;
                float *tile = tiles[current];
                const int listed = fused_tile(a + p * FUSED_ROWS * dims, packed + q * FUSED_COLS * dims, dims, chunk,
                                              tile, prior >= 0 ? slots[prior] : 0, cell_counts, impure_at);
                if (prior >= 0) FUSED_SETTLE(listed)
                const int64_t j0 = q * FUSED_COLS, n = width - j0 < FUSED_COLS ? width - j0 : FUSED_COLS;
                const int64_t rows_here = rows - p * FUSED_ROWS < FUSED_ROWS ? rows - p * FUSED_ROWS : FUSED_ROWS;
                uint32_t high[FUSED_ROWS];
                if (fused_tile_slots(tile, rows_here, n, kind, kind == 1 ? col_terms + j0 : 0,
                                     kind == 1 ? row_terms + p * FUSED_ROWS : 0, base, scale, upper, floor, spare,
                                     slots[current], high)) {
                    free(a);
                    return -1;
                }
                for (int64_t r = 0; tops && r < rows_here; ++r)
                    for (uint32_t bits = high[r]; bits; bits &= bits - 1) { /* the keys >= floor */
                        const int jj = __builtin_ctz(bits);
                        if (kept < top_capacity) {
                            tops[kept] = (p * FUSED_ROWS + r) * width + j0 + jj;
                            top_keys[kept] = tile[r * FUSED_COLS + jj];
                        }
                        ++kept;
                    }
                prior = current;
                prior_i0 = p * FUSED_ROWS;
                prior_j0 = j0;
            }
        }
    }
    if (prior >= 0) {
        const int listed = fused_count_tile(slots[prior], cell_counts, impure_at);
        FUSED_SETTLE(listed)
    }
    FUSED_FLUSH();
#undef FUSED_SETTLE
#undef FUSED_DEFER
#undef FUSED_FLUSH
    matrix_pure_counts(cell_counts, cells, ab, beyond, reached);
    if (tops) *top_count = kept;
    free(a);
    return recorded;
#else
    (void)queries; (void)rows; (void)packed; (void)columns; (void)width; (void)dims; (void)chunk; (void)row_terms;
    (void)col_terms; (void)lows; (void)highs; (void)count; (void)codes; (void)impure; (void)ab; (void)cells;
    (void)base; (void)scale; (void)cell_counts; (void)beyond; (void)reached; (void)record; (void)pairs;
    (void)capacity; (void)floor; (void)tops; (void)top_keys; (void)top_capacity; (void)top_count; (void)kind;
    (void)queries64; (void)keys64_lo; (void)keys64_hi; (void)pair_terms; (void)pair_norms; (void)centers;
    (void)pair_extra;
    return -2;
#endif
}
