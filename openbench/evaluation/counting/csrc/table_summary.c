#include "counting.h"

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

