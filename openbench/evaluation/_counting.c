/* One read pass over score rows: how many candidates score better than, equal to, or NaN
 * relative to each row's target score. Loaded with ctypes (no Python headers needed); the
 * caller splits rows across threads, and ctypes releases the GIL during the call.
 *
 * Comparisons are IEEE-exact: compile without -ffast-math. Counters are 32-bit inside a row
 * (rows are at most 2^31 - 1 wide), which lets the compiler vectorise the loop.
 */
#include <stdint.h>

#define COUNT_ROWS(NAME, T)                                                                         \
    void NAME(const T *scores, int64_t stride, int64_t width, int64_t row_begin, int64_t row_end,   \
              const T *targets, int lower_is_better, int64_t *greater, int64_t *equal,              \
              int64_t *nans)                                                                        \
    {                                                                                               \
        for (int64_t i = row_begin; i < row_end; ++i) {                                             \
            const T *row = scores + i * stride;                                                     \
            const T target = targets[i];                                                            \
            int32_t g = 0, e = 0, n = 0;                                                            \
            if (lower_is_better) {                                                                  \
                for (int64_t j = 0; j < width; ++j) {                                               \
                    const T x = row[j];                                                             \
                    g += x < target;                                                                \
                    e += x == target;                                                               \
                    n += x != x;                                                                    \
                }                                                                                   \
            } else {                                                                                \
                for (int64_t j = 0; j < width; ++j) {                                               \
                    const T x = row[j];                                                             \
                    g += x > target;                                                                \
                    e += x == target;                                                               \
                    n += x != x;                                                                    \
                }                                                                                   \
            }                                                                                       \
            greater[i] = g;                                                                         \
            equal[i] = e;                                                                           \
            nans[i] = n;                                                                            \
        }                                                                                           \
    }

COUNT_ROWS(openbench_count_rows_f32, float)
COUNT_ROWS(openbench_count_rows_f64, double)
