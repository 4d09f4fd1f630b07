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
#include "matrix.h"
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

#define MATRIX_SPAN 128

#define MATRIX_COUNT(NAME, T, BELOW, SLOTS)                                                         \
    int64_t NAME(const ob_matrix_pass *args)                                                        \
    {                                                                                               \
        const ob_matrix_pass P = *args; /* a local copy: no store of the pass aliases its fields */ \
        const T *keys = (const T *)P.keys;                                                          \
        const int64_t rows = P.rows, width = P.width, stride = P.stride;                            \
        const T base = (T)P.base, scale = (T)P.scale, floor = (T)P.floor;                           \
        int64_t recorded = 0, kept = 0;                                                             \
        int32_t slot[MATRIX_SPAN];                                                                  \
        const T upper = (T)P.cells;                                                                 \
        for (int64_t c = 0; c < P.cells + 2; ++c) P.cell_counts[c] = P.codes[c];                    \
        for (int64_t first = 0; first < width; first += MATRIX_SPAN) {                              \
            const int64_t last = first + MATRIX_SPAN < width ? first + MATRIX_SPAN : width;         \
            for (int64_t i = 0; i < rows; ++i) {                                                    \
                const T *row = keys + i * stride;                                                   \
                const double *query = P.queries64 ? P.queries64 + i * P.dims : 0;                   \
                int high = 0;                                                                       \
                const int nan = SLOTS(row + first, last - first, base, scale, upper, floor, slot, &high); \
                if (nan) { /* the first NaN in row order, whatever the order of the pass */        \
                    for (int64_t r = 0; r < rows; ++r)                                              \
                        for (int64_t j = 0; j < width; ++j)                                         \
                            if (keys[r * stride + j] != keys[r * stride + j]) return -1 - (r * width + j); \
                }                                                                                   \
                for (int64_t j = first; j < last; ++j)                                              \
                    MATRIX_COUNT_KEY(P, recorded, T, BELOW, PLAIN_FLOAT64_KEY(P, T, query, j), MATRIX_NOW, \
                                     row[j], slot[j - first], i, j, query);                         \
                if (P.tops && high) {                                                               \
                    for (int64_t j = first; j < last; ++j)                                          \
                        if (row[j] >= floor) {                                                      \
                            if (kept < P.top_capacity) P.tops[kept] = i * width + j;                \
                            ++kept;                                                                 \
                        }                                                                           \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
        matrix_pure_counts(P.cell_counts, P.cells, P.ab, P.beyond, P.reached);                      \
        if (P.tops) *P.top_count = kept;                                                            \
        return recorded;                                                                            \
    }

MATRIX_COUNT(openbench_matrix_count_f32, float, count_below_f32, matrix_slots_f32)
MATRIX_COUNT(openbench_matrix_count_f64, double, count_below_f64, matrix_slots_f64)


/* ob_matrix_pass's size and field offsets, for Python's check at load. */
OB_LAYOUT(openbench_matrix_pass_layout, ob_matrix_pass, OB_MATRIX_PASS_FIELDS)

/* The widening factor of the rounding bounds as this build has it (OB_BOUND_WIDENING). */
double openbench_bound_widening(void)
{
    return OB_BOUND_WIDENING;
}
