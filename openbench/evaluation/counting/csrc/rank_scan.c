/* The ranking passes over score rows (chain.py, tally.py): see counting.h. */
#include "counting.h"

/* One span's counts (columns FIRST .. LAST - 1 of ROW): beyond the window [LOW, HIGH] on the better
 * side into GS, inside it into ES, NaN into NS (int32: a span is short); with CHECK_NAN false the
 * scores are finite and two comparisons per score suffice (inside = reached - beyond). Both
 * portable scans count a span so. */
#define SPAN_COUNTS(T, ROW, FIRST, LAST, LOW, HIGH, LOWER_IS_BETTER, CHECK_NAN, GS, ES, NS)         \
    do {                                                                                            \
        int32_t gs_ = 0, es_ = 0, ns_ = 0;                                                          \
        if (!(CHECK_NAN)) { /* finite scores: inside = reached - beyond (LOW <= HIGH), 2 tests */   \
            int32_t reached_ = 0;                                                                   \
            if ((LOWER_IS_BETTER)) {                                                                \
                for (int64_t j = (FIRST); j < (LAST); ++j) {                                        \
                    gs_ += (ROW)[j] < (LOW);                                                        \
                    reached_ += (ROW)[j] <= (HIGH);                                                 \
                }                                                                                   \
            } else {                                                                                \
                for (int64_t j = (FIRST); j < (LAST); ++j) {                                        \
                    gs_ += (ROW)[j] > (HIGH);                                                       \
                    reached_ += (ROW)[j] >= (LOW);                                                  \
                }                                                                                   \
            }                                                                                       \
            es_ = reached_ - gs_;                                                                   \
        } else if ((LOWER_IS_BETTER)) {                                                             \
            for (int64_t j = (FIRST); j < (LAST); ++j) {                                            \
                const T x = (ROW)[j];                                                               \
                gs_ += x < (LOW);                                                                   \
                es_ += (x >= (LOW)) & (x <= (HIGH));                                                \
                ns_ += x != x;                                                                      \
            }                                                                                       \
        } else {                                                                                    \
            for (int64_t j = (FIRST); j < (LAST); ++j) {                                            \
                const T x = (ROW)[j];                                                               \
                gs_ += x > (HIGH);                                                                  \
                es_ += (x >= (LOW)) & (x <= (HIGH));                                                \
                ns_ += x != x;                                                                      \
            }                                                                                       \
        }                                                                                           \
        GS = gs_;                                                                                   \
        ES = es_;                                                                                   \
        NS = ns_;                                                                                   \
    } while (0)

#define COUNT_ROWS(NAME, T)                                                                         \
    COUNT_TARGETS void NAME(const ob_count_window *args)                                            \
    {                                                                                               \
        const T *scores = (const T *)args->scores;                                                  \
        const int64_t stride = args->stride, width = args->width;                                   \
        const int64_t row_begin = args->row_begin, row_end = args->row_end;                         \
        const T *lows = (const T *)args->lows, *highs = (const T *)args->highs;                     \
        const int lower_is_better = (int)args->lower_is_better;                                     \
        int64_t *better = args->better, *inside = args->inside, *nans = args->nans;                 \
        int64_t *positions = args->positions;                                                       \
        const int64_t capacity = args->capacity;                                                    \
        for (int64_t i = row_begin; i < row_end; ++i) {                                             \
            const T *row = scores + i * stride;                                                     \
            const T low = lows[i], high = highs[i];                                                 \
            int64_t g = 0, e = 0, n = 0;                                                            \
            for (int64_t first = 0; first < width; first += SPAN) {                                 \
                const int64_t last = first + SPAN < width ? first + SPAN : width;                   \
                int32_t gs, es, ns;                                                                 \
                SPAN_COUNTS(T, row, first, last, low, high, lower_is_better, nans, gs, es, ns);     \
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
            int32_t gs, es, ns;                                                                     \
            SPAN_COUNTS(T, row, first, last, low, high, lower_is_better, check_nan, gs, es, ns);    \
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
#ifdef HAVE_AVX512_SCAN

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

#define COUNT_CHUNK(NAME, T, SCAN, SCAN_AVX512, SCAN_AVX2)                                                    \
    void NAME(const ob_chunk_count *args)                                                           \
    {                                                                                               \
        T *scores = (T *)args->scores;                                                              \
        const int64_t stride = args->stride, width = args->width, start = args->start;              \
        const int64_t row_begin = args->row_begin, row_end = args->row_end;                         \
        const T *lows = (const T *)args->lows, *highs = (const T *)args->highs;                     \
        const int lower_is_better = (int)args->lower_is_better, window = (int)args->window;         \
        const int64_t *true_ids = args->true_ids;                                                   \
        const T *true_scores = (const T *)args->true_scores;                                        \
        const int64_t *known_offsets = args->known_offsets, *known_cols = args->known_cols;         \
        int64_t *better = args->better, *inside = args->inside, *nans = args->nans;                 \
        uint8_t *true_differs = args->true_differs;                                                 \
        int64_t *positions = args->positions, *fill = args->fill;                                   \
        const int64_t capacity = args->capacity;                                                    \
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


/* ob_chunk_count's size and field offsets, for Python's check at load. */
OB_LAYOUT(openbench_chunk_count_layout, ob_chunk_count, OB_CHUNK_COUNT_FIELDS)

/* ob_count_window's size and field offsets, for Python's check at load. */
OB_LAYOUT(openbench_count_window_layout, ob_count_window, OB_COUNT_WINDOW_FIELDS)
