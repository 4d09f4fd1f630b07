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
#include "matrix.h"

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

/* Keys inside a pair's window wait here for their float64 step, their query row and column
 * fetched meanwhile (each step otherwise waits on some 40 lines from L3). */
typedef struct fused_state {
    int64_t recorded;                   /* the undecided keys recorded so far */
    int64_t pair[FUSED_DEFERRED][2];    /* a deferred key's row and column */
    int64_t range[FUSED_DEFERRED][2];   /* its thresholds' range a .. b */
    int deferred;                       /* how many wait */
    int64_t prior_i0, prior_j0;         /* the first row and column of the tile being settled */
} fused_state;

/* The waiting keys' float64 step: each placed among the float64 windows, recorded where still
 * undecided, and counted. */
static inline void fused_flush(const ob_matrix_pass *P, fused_state *S)
{
    for (int d = 0; d < S->deferred; ++d) {
        const int64_t i = S->pair[d][0], j = S->pair[d][1];
        const double key = float64_key_of((int)P->kind, P->queries64 + i * P->dims,
                                          (const float *)P->columns + j * P->dims, 0, P->dims);
        const int64_t a = count_below_f64(P->keys64_hi, S->range[d][0], S->range[d][1], key, 1);
        const int64_t b = count_below_f64(P->keys64_lo, a, S->range[d][1], key, 0);
        MATRIX_RECORD(*P, S->recorded, i, j, a, b);
        P->beyond[a] += 1;
        P->reached[b] += 1;
    }
    S->deferred = 0;
}

/* Key (i, j), inside thresholds a .. b, waits for its float64 step (MATRIX_COUNT_KEY's DEFER:
 * always 1, the key is taken). */
static inline int fused_defer(const ob_matrix_pass *P, fused_state *S, int64_t i, int64_t j, int64_t a, int64_t b)
{
    if (S->deferred == FUSED_DEFERRED) fused_flush(P, S);
    S->pair[S->deferred][0] = i;
    S->pair[S->deferred][1] = j;
    S->range[S->deferred][0] = a;
    S->range[S->deferred][1] = b;
    fused_fetch(P->queries64 + i * P->dims, (const float *)P->columns + j * P->dims, P->dims);
    ++S->deferred;
    return 1;
}

/* The settled tile's keys of impure cells (`listed` of them, at impure_at), placed one by one
 * from its keys `tile` and cells `slots`. */
#define FUSED_DEFER(I, J, A, B) fused_defer(P, S, I, J, A, B)
static inline void fused_settle(const ob_matrix_pass *P, fused_state *S, const float *tile, const int32_t *slots,
                                const int32_t *impure_at, int listed)
{
    for (int t = 0; t < listed; ++t) {
        const int at = impure_at[t];
        const int64_t i = S->prior_i0 + (at >> 5), j = S->prior_j0 + (at & 31);
        const double *query = P->queries64 ? P->queries64 + i * P->dims : 0;
        MATRIX_COUNT_KEY(*P, S->recorded, float, count_below_padded_f32, PLAIN_FLOAT64_KEY(*P, float, query, j),
                         FUSED_DEFER, tile[at], slots[at], i, j, query);
    }
}
#undef FUSED_DEFER
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
int64_t openbench_matrix_fused_keys_f32(const ob_matrix_pass *args)
{
#ifdef HAVE_AVX512_SCAN
    const float *queries = args->queries, *packed = args->packed, *row_terms = args->row_terms;
    const float *col_terms = args->col_terms;
    const int64_t rows = args->rows, width = args->width, dims = args->dims;
    const int kind = (int)args->kind;
    const int64_t chunk = args->chunk < 1 ? 1 : args->chunk;
    float *out = args->out;
    if (chosen_isa() != 1) return -2;
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
    (void)args;
    return -2;
#endif
}

#ifdef HAVE_AVX512_SCAN
__attribute__((target("avx512f")))
#endif
int64_t openbench_matrix_fused_f32(const ob_matrix_pass *args)
{
#ifdef HAVE_AVX512_SCAN
    const ob_matrix_pass pass = *args; /* a local copy: no store of the pass aliases its fields */
    const ob_matrix_pass *P = &pass;
    const int64_t rows = P->rows, width = P->width, dims = P->dims, cells = P->cells;
    const int64_t chunk = P->chunk < 1 ? 1 : P->chunk;
    const int kind = (int)P->kind;
    const float base = (float)P->base, scale = (float)P->scale, floor = (float)P->floor;
    int32_t *cell_counts = P->cell_counts;
    if (chosen_isa() != 1) return -2;
    const int64_t panels = (rows + FUSED_ROWS - 1) / FUSED_ROWS;
    const int64_t column_panels = (width + FUSED_COLS - 1) / FUSED_COLS;
    float *a = fused_row_panels(P->queries, rows, dims);
    if (!a) return -3;
    for (int64_t c = 0; c < cells + 2; ++c) cell_counts[c] = P->codes[c];
    const int32_t spare = (int32_t)(cells + 2); /* the places of a partial tile outside the matrix count here */
    cell_counts[spare] = 0;
    int64_t kept = 0;
    fused_state state = {0};
    fused_state *S = &state;
    const float upper = (float)cells;
    float tiles[2][FUSED_KEYS] __attribute__((aligned(64)));
    int32_t slots[2][FUSED_KEYS] __attribute__((aligned(64)));
    int32_t impure_at[FUSED_KEYS];
    int prior = -1; /* the buffer of the tile whose cells the next tile's products count, -1: none */
    for (int64_t g = 0; g < column_panels; g += FUSED_GROUP) {
        const int64_t g_end = g + FUSED_GROUP < column_panels ? g + FUSED_GROUP : column_panels;
        for (int64_t p = 0; p < panels; ++p) {
            for (int64_t q = g; q < g_end; ++q) {
                const int current = prior == 0 ? 1 : 0;
                float *tile = tiles[current];
                const int listed = fused_tile(a + p * FUSED_ROWS * dims, P->packed + q * FUSED_COLS * dims, dims, chunk,
                                              tile, prior >= 0 ? slots[prior] : 0, cell_counts, impure_at);
                if (prior >= 0) fused_settle(P, S, tiles[prior], slots[prior], impure_at, listed);
                const int64_t j0 = q * FUSED_COLS, n = width - j0 < FUSED_COLS ? width - j0 : FUSED_COLS;
                const int64_t rows_here = rows - p * FUSED_ROWS < FUSED_ROWS ? rows - p * FUSED_ROWS : FUSED_ROWS;
                uint32_t high[FUSED_ROWS];
                if (fused_tile_slots(tile, rows_here, n, kind, kind == 1 ? P->col_terms + j0 : 0,
                                     kind == 1 ? P->row_terms + p * FUSED_ROWS : 0, base, scale, upper, floor, spare,
                                     slots[current], high)) {
                    free(a);
                    return -1;
                }
                for (int64_t r = 0; P->tops && r < rows_here; ++r)
                    for (uint32_t bits = high[r]; bits; bits &= bits - 1) { /* the keys >= floor */
                        const int jj = __builtin_ctz(bits);
                        if (kept < P->top_capacity) {
                            P->tops[kept] = (p * FUSED_ROWS + r) * width + j0 + jj;
                            P->top_keys[kept] = tile[r * FUSED_COLS + jj];
                        }
                        ++kept;
                    }
                prior = current;
                S->prior_i0 = p * FUSED_ROWS;
                S->prior_j0 = j0;
            }
        }
    }
    if (prior >= 0) {
        const int listed = fused_count_tile(slots[prior], cell_counts, impure_at);
        fused_settle(P, S, tiles[prior], slots[prior], impure_at, listed);
    }
    fused_flush(P, S);
    matrix_pure_counts(cell_counts, cells, P->ab, P->beyond, P->reached);
    if (P->tops) *P->top_count = kept;
    free(a);
    return S->recorded;
#else
    (void)args;
    return -2;
#endif
}

