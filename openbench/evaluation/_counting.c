/* One read pass over score rows: how many candidates score better than a row's window, inside
 * it, or NaN. The window of row i is [low_i, high_i]; with low == high it is the target score
 * itself, and "inside" means "tied". Exact ranks (see exact.py) widen it by a rounding-error
 * bound and re-score only the candidates inside, whose columns this pass also records (the
 * first `capacity` of each row) so that nobody has to read the block again to find them.
 * Loaded with ctypes (no Python headers needed); the caller splits rows across threads, and
 * ctypes releases the GIL during the call.
 *
 * Comparisons are IEEE-exact: compile without -ffast-math. Counters are 32-bit inside a row
 * (rows are at most 2^31 - 1 wide), which lets the compiler vectorise the inner loop; columns are
 * taken in spans of SPAN, and only a span holding an inside candidate is read a second time
 * (from cache) to record where.
 */
#include <stdint.h>

#define SPAN 64

#define COUNT_ROWS(NAME, T)                                                                         \
    void NAME(const T *scores, int64_t stride, int64_t width, int64_t row_begin, int64_t row_end,   \
              const T *lows, const T *highs, int lower_is_better, int64_t *better, int64_t *inside, \
              int64_t *nans, int64_t *positions, int64_t capacity)                                  \
    {                                                                                               \
        for (int64_t i = row_begin; i < row_end; ++i) {                                             \
            const T *row = scores + i * stride;                                                     \
            const T low = lows[i], high = highs[i];                                                 \
            int64_t g = 0, e = 0, n = 0;                                                            \
            for (int64_t first = 0; first < width; first += SPAN) {                                 \
                const int64_t last = first + SPAN < width ? first + SPAN : width;                   \
                int32_t gs = 0, es = 0, ns = 0;                                                     \
                if (lower_is_better) {                                                              \
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
            nans[i] = n;                                                                            \
        }                                                                                           \
    }

COUNT_ROWS(openbench_count_window_f32, float)
COUNT_ROWS(openbench_count_window_f64, double)
