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
#include "counting.h"


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
    void NAME(const ob_pair_keys *args)                                                             \
    {                                                                                               \
        const int kind = (int)args->kind;                                                           \
        const double *queries = args->queries;                                                      \
        const T *truths = (const T *)args->truths, *table = (const T *)args->table;                 \
        const int64_t width = args->width, stride = args->stride, count = args->count;              \
        const int64_t *rows = args->rows, *cols = args->cols;                                       \
        double *keys = args->keys, *norm2 = args->norm2, *norm1 = args->norm1;                      \
        uint8_t *identical = args->identical;                                                       \
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
#define ROW_NORMS(NAME, T, SUMS)                                                                    \
    void NAME(const T *table, int64_t stride, int64_t width, int64_t count, double *norm2,          \
              double *norm1)                                                                        \
    {                                                                                               \
        for (int64_t p = 0; p < count; ++p) {                                                       \
            double sums[2];                                                                         \
            SUMS(table + p * stride, width, sums);                                                  \
            norm2[p] = sqrt(sums[0] + (double)width * SUBNORMAL_MIN);                               \
            norm1[p] = sums[1];                                                                     \
        }                                                                                           \
    }

ROW_NORMS(openbench_row_norms_f32, float, row_norms_f32_portable)
ROW_NORMS(openbench_row_norms_f64, double, row_norms_f64_portable)

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
    void NAME(const ob_query_rows *args)                                                            \
    {                                                                                               \
        const int code = (int)args->code, kind = (int)args->kind;                                   \
        const T *entities = (const T *)args->entities, *relations = (const T *)args->relations;    \
        const int64_t entity_stride = args->entity_stride, relation_stride = args->relation_stride; \
        const int64_t *anchors = args->anchors, *relation_ids = args->relation_ids;                 \
        const int64_t count = args->count, width = args->width;                                     \
        double *queries = args->queries, *norm2 = args->norm2, *norm1 = args->norm1;                \
        const T *truths = (const T *)args->truths;                                                  \
        double *true_keys = args->true_keys, *true_norm2 = args->true_norm2;                        \
        double *true_norm1 = args->true_norm1;                                                      \
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


/* ob_query_rows's size and field offsets, for Python's check at load. */
OB_LAYOUT(openbench_query_rows_layout, ob_query_rows, OB_QUERY_ROWS_FIELDS)

/* ob_pair_keys's size and field offsets, for Python's check at load. */
OB_LAYOUT(openbench_pair_keys_layout, ob_pair_keys, OB_PAIR_KEYS_FIELDS)
