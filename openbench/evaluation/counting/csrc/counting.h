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
 *
 * The kernels live in one file per concern, all built into one library (setup.py):
 *   rank_scan.c      the ranking passes: windows over score rows, the fused chunk count (AVX-512,
 *                    AVX2 and portable scans)
 *   exact_keys.c     exact ranks' float64 keys of pairs, row norms, queries, fraction bits
 *   table_summary.c  what evaluation reads of a candidate table once
 *   matrix_pass.c    the repurposing matrix's count of a block of keys (matrix.h: what it shares
 *                    with the fused pass)
 *   fused_pass.c     the matrix's fused pass: keys computed a tile at a time and counted in cache
 *   dispatch.c       which instruction set the passes use, chosen once by the CPU
 * This header holds what they share: the build's instruction-set switches, the norm terms, the
 * dispatch and the library's cross-file entry points.
 */
#ifndef OPENBENCH_COUNTING_H
#define OPENBENCH_COUNTING_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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



/* AVX-512 and AVX2 code paths (x86-64 with GCC or clang), each chosen at run time by the CPU. */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define HAVE_AVX512_SCAN 1
#include <immintrin.h>
#endif

#if defined(__GNUC__) || defined(__clang__)
#define OB_INTERNAL __attribute__((visibility("hidden"))) /* shared between the files, not exported */
#else
#define OB_INTERNAL
#endif

#define SUBNORMAL_MIN 4.9406564584124654e-324

/* One coordinate c[K] into the partial sums LANE of its square (sq) and its magnitude (ab): the
 * row norms of exact_keys.c and table_summary.c, the same additions in the same order. */
#define NORM_TERM(K, LANE)                                                                          \
    {                                                                                               \
        const double x = (double)c[K];                                                              \
        sq##LANE += x * x;                                                                          \
        ab##LANE += fabs(x);                                                                        \
    }

/* The argument structs of the entry points with many arguments: each struct's fields are listed
 * once, as X(TYPE, NAME) in declaration order (OB_*_FIELDS); the struct is declared from the list
 * (OB_DECLARE) and so is its layout function (OB_LAYOUT), which tells Python's ctypes mirror
 * (c_structs.py, matrix/c_pass.py) the struct's size and each field's offset to check at load. */
#define OB_DECLARE(TYPE, NAME) TYPE NAME;
#define OB_OFFSET(TYPE, NAME) (int64_t)offsetof(ob_layout_of, NAME),
#define OB_LAYOUT(FUNCTION, STRUCT, FIELDS)                                                         \
    int64_t FUNCTION(int64_t *offsets, int64_t n)                                                   \
    {                                                                                               \
        typedef STRUCT ob_layout_of;                                                                \
        const int64_t layout[] = {FIELDS(OB_OFFSET)};                                               \
        const int64_t fields = (int64_t)(sizeof layout / sizeof layout[0]);                         \
        for (int64_t k = 0; k < n && k < fields; ++k) offsets[k] = layout[k];                       \
        return (int64_t)sizeof(STRUCT);                                                             \
    }

/* The ranking chunk count's arguments (rank_scan.c's openbench_count_chunk_*; Python's
 * kernels.ChunkCountArgs mirrors it, checked against openbench_chunk_count_layout at load).
 * `scores`, `lows`, `highs` and `true_scores` hold float (the _f32 entry) or double (_f64). */
#define OB_CHUNK_COUNT_FIELDS(X)                                                                    \
    X(void *, scores)                                                                               \
    X(int64_t, stride) X(int64_t, width) X(int64_t, start) X(int64_t, row_begin) X(int64_t, row_end)\
    X(const void *, lows) X(const void *, highs)                                                    \
    X(int64_t, lower_is_better) X(int64_t, window)                                                  \
    X(const int64_t *, true_ids)                                                                    \
    X(const void *, true_scores)                                                                    \
    X(const int64_t *, known_offsets) X(const int64_t *, known_cols)                                \
    X(int64_t *, better) X(int64_t *, inside) X(int64_t *, nans)                                    \
    X(uint8_t *, true_differs)                                                                      \
    X(int64_t *, positions) X(int64_t *, fill)                                                      \
    X(int64_t, capacity)
typedef struct ob_chunk_count {
    OB_CHUNK_COUNT_FIELDS(OB_DECLARE)
} ob_chunk_count;

/* Exact ranks' queries' arguments (exact_keys.c's openbench_query_rows_*; Python's
 * exact_keys.QueryRowsArgs mirrors it, checked against openbench_query_rows_layout at load).
 * `entities`, `relations` and `truths` hold float (_f32) or double (_f64). */
#define OB_QUERY_ROWS_FIELDS(X)                                                                     \
    X(int64_t, code)                                                                                \
    X(const void *, entities)                                                                       \
    X(int64_t, entity_stride)                                                                       \
    X(const void *, relations)                                                                      \
    X(int64_t, relation_stride)                                                                     \
    X(const int64_t *, anchors) X(const int64_t *, relation_ids)                                    \
    X(int64_t, count) X(int64_t, width)                                                             \
    X(double *, queries) X(double *, norm2) X(double *, norm1)                                      \
    X(int64_t, kind)                                                                                \
    X(const void *, truths)                                                                         \
    X(double *, true_keys) X(double *, true_norm2) X(double *, true_norm1)
typedef struct ob_query_rows {
    OB_QUERY_ROWS_FIELDS(OB_DECLARE)
} ob_query_rows;

/* The window count's arguments (rank_scan.c's openbench_count_window_*; kernels.CountWindowArgs):
 * `scores`, `lows` and `highs` hold float (_f32) or double (_f64). */
#define OB_COUNT_WINDOW_FIELDS(X)                                                                   \
    X(const void *, scores)                                                                         \
    X(int64_t, stride) X(int64_t, width) X(int64_t, row_begin) X(int64_t, row_end)                  \
    X(const void *, lows) X(const void *, highs)                                                    \
    X(int64_t, lower_is_better)                                                                     \
    X(int64_t *, better) X(int64_t *, inside) X(int64_t *, nans) X(int64_t *, positions)            \
    X(int64_t, capacity)
typedef struct ob_count_window {
    OB_COUNT_WINDOW_FIELDS(OB_DECLARE)
} ob_count_window;

/* Exact ranks' pair keys' arguments (exact_keys.c's openbench_pair_keys_*; c_structs.PairKeysArgs):
 * `truths` and `table` hold float (_f32) or double (_f64). */
#define OB_PAIR_KEYS_FIELDS(X)                                                                      \
    X(int64_t, kind)                                                                                \
    X(const double *, queries)                                                                      \
    X(const void *, truths)                                                                         \
    X(int64_t, width)                                                                               \
    X(const void *, table)                                                                          \
    X(int64_t, stride)                                                                              \
    X(const int64_t *, rows) X(const int64_t *, cols)                                               \
    X(int64_t, count)                                                                               \
    X(double *, keys) X(double *, norm2) X(double *, norm1)                                         \
    X(uint8_t *, identical)
typedef struct ob_pair_keys {
    OB_PAIR_KEYS_FIELDS(OB_DECLARE)
} ob_pair_keys;

/* One row's sums (squares, magnitudes) as NORM_TERM adds them: partial sums 0..3 over the
 * coordinates k mod 4, each in order, then the tail into sum 0. Every row norm of the library
 * (exact_keys.c's, table_summary.c's portable and AVX paths) is these additions in this order. */
#define ROW_NORMS_PORTABLE(NAME, T)                                                                 \
    static inline void NAME(const T *c, int64_t width, double *sums)                                       \
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

/* -- the CPU dispatch (dispatch.c) ------------------------------------------------------------
 * 0: the portable passes; 1: AVX-512; 2: AVX2. -1 until the first pass asks. */
OB_INTERNAL extern int ob_scan_isa;
OB_INTERNAL int ob_choose_isa(void);
OB_INTERNAL int ob_best_isa(void);

static inline int chosen_isa(void)
{
    return ob_scan_isa >= 0 ? ob_scan_isa : ob_choose_isa();
}

/* exact_keys.c's fraction bits, read by table_summary.c */
int64_t openbench_fraction_bits_f32(const float *values, int64_t count);
int64_t openbench_fraction_bits_f64(const double *values, int64_t count);

#endif /* OPENBENCH_COUNTING_H */
