/* The output order of the edge table: a stable radix sort of rows by one packed key
 * (rank of id1, edge type, rank of id2), loaded with ctypes (no Python headers needed).
 *
 * Row i has key  rank_of[code1[i]] | type[i] | rank_of[code2[i]] | passenger[i]  (bit fields of
 * rank_bits, type_bits, rank_bits and passenger_bits, most significant first). The passenger (a
 * code the caller wants in output order, e.g. the score) rides in the low bits and is not sorted
 * on. openbench_partition_edges builds the keys and moves the rows into 256 buckets by the key's
 * top 8 bits (most significant digit first); openbench_sort_bucket then sorts one bucket, so the
 * caller can spread the buckets over threads (ctypes releases the GIL). Inside a bucket, parts of
 * more than SMALL rows are split again by the next 8 bits, smaller ones are finished least
 * significant digit first while they sit in cache. Every pass moves rows stably, so rows with
 * equal keys keep their order. The sorted bucket is written out decoded: order (source rows),
 * sorted1, sorted_type, sorted2, sorted_passenger (per output position), so that the writer reads
 * these columns sequentially rather than gathering them through the order.
 */
#include <stdint.h>
#include <string.h>

#define DIGIT_BITS 8
#define BUCKETS (1 << DIGIT_BITS)
#define SMALL 4096

/* Stable LSD sort of (keys, rows)[0, n) by key bits [low, top); scratch is as long; the result is
 * left in (keys, rows). Bits above top are equal within the range (or sorted already). */
static void sort_low_digits(uint64_t *keys, uint32_t *rows, uint64_t *scratch_keys, uint32_t *scratch_rows,
                            int64_t n, int32_t low, int32_t top)
{
    uint64_t *source_keys = keys, *target_keys = scratch_keys;
    uint32_t *source_rows = rows, *target_rows = scratch_rows;
    int64_t offsets[BUCKETS];
    for (int32_t shift = low; shift < top; shift += DIGIT_BITS) {
        memset(offsets, 0, sizeof(offsets));
        for (int64_t i = 0; i < n; ++i)
            ++offsets[(source_keys[i] >> shift) & (BUCKETS - 1)];
        int single_digit = 0;
        int64_t running = 0;
        for (int32_t b = 0; b < BUCKETS; ++b) {
            const int64_t count = offsets[b];
            single_digit |= count == n;
            offsets[b] = running;
            running += count;
        }
        if (single_digit)
            continue;  /* every row has this digit: the pass would move nothing */
        for (int64_t i = 0; i < n; ++i) {
            const int64_t position = offsets[(source_keys[i] >> shift) & (BUCKETS - 1)]++;
            target_keys[position] = source_keys[i];
            target_rows[position] = source_rows[i];
        }
        uint64_t *swap_keys = source_keys;
        source_keys = target_keys;
        target_keys = swap_keys;
        uint32_t *swap_rows = source_rows;
        source_rows = target_rows;
        target_rows = swap_rows;
    }
    if (source_keys != keys) {
        memcpy(keys, source_keys, (size_t)n * sizeof(uint64_t));
        memcpy(rows, source_rows, (size_t)n * sizeof(uint32_t));
    }
}

/* Stable scatter of (keys, rows)[0, n) into (target_keys, target_rows) by key bits
 * [shift, shift + 8); bounds[b], bounds[b + 1] delimit bucket b afterwards. */
static void scatter_digit(const uint64_t *keys, const uint32_t *rows, uint64_t *target_keys, uint32_t *target_rows,
                          int64_t n, int32_t shift, int64_t *bounds)
{
    int64_t positions[BUCKETS];
    memset(positions, 0, sizeof(positions));
    for (int64_t i = 0; i < n; ++i)
        ++positions[(keys[i] >> shift) & (BUCKETS - 1)];
    int64_t running = 0;
    for (int32_t b = 0; b < BUCKETS; ++b) {
        const int64_t count = positions[b];
        bounds[b] = positions[b] = running;
        running += count;
    }
    bounds[BUCKETS] = n;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t position = positions[(keys[i] >> shift) & (BUCKETS - 1)]++;
        target_keys[position] = keys[i];
        target_rows[position] = rows[i];
    }
}

/* Sort (keys, rows)[0, n) by key bits [low, top), most significant digit first while parts are
 * large; the result is left in (keys, rows). */
static void sort_digits(uint64_t *keys, uint32_t *rows, uint64_t *scratch_keys, uint32_t *scratch_rows, int64_t n,
                        int32_t low, int32_t top)
{
    if (n <= SMALL || top - low <= DIGIT_BITS) {
        sort_low_digits(keys, rows, scratch_keys, scratch_rows, n, low, top);
        return;
    }
    const int32_t shift = top - DIGIT_BITS;
    int64_t bounds[BUCKETS + 1];
    scatter_digit(keys, rows, scratch_keys, scratch_rows, n, shift, bounds);
    for (int32_t b = 0; b < BUCKETS; ++b) {
        const int64_t begin = bounds[b], count = bounds[b + 1] - bounds[b];
        if (count == 0)
            continue;
        sort_digits(scratch_keys + begin, scratch_rows + begin, keys + begin, rows + begin, count, low, shift);
        memcpy(keys + begin, scratch_keys + begin, (size_t)count * sizeof(uint64_t));
        memcpy(rows + begin, scratch_rows + begin, (size_t)count * sizeof(uint32_t));
    }
}

/* The lowest bit of the top digit of keys sorted on bits [low, key_bits). */
static int32_t top_shift(int32_t low, int32_t key_bits)
{
    return key_bits - low > DIGIT_BITS ? key_bits - DIGIT_BITS : low;
}

/* Build the keys of n rows in (scratch_keys, scratch_rows) and move them into (keys, rows) by
 * the top digit; bounds (257 entries) receives the bucket limits. passenger may be NULL. */
void openbench_partition_edges(int64_t n, const uint32_t *code1, const uint32_t *code2, const uint32_t *rank_of,
                               const uint8_t *type, const uint32_t *passenger, int32_t rank_bits, int32_t type_bits,
                               int32_t passenger_bits, uint64_t *keys, uint32_t *rows, uint64_t *scratch_keys,
                               uint32_t *scratch_rows, int64_t *bounds)
{
    const int32_t second_shift = passenger_bits, type_shift = second_shift + rank_bits;
    const int32_t first_shift = type_shift + type_bits, key_bits = first_shift + rank_bits;
    for (int64_t i = 0; i < n; ++i) {
        scratch_keys[i] = ((uint64_t)rank_of[code1[i]] << first_shift) | ((uint64_t)type[i] << type_shift)
                          | ((uint64_t)rank_of[code2[i]] << second_shift) | (passenger ? (uint64_t)passenger[i] : 0);
        scratch_rows[i] = (uint32_t)i;
    }
    scatter_digit(scratch_keys, scratch_rows, keys, rows, n, top_shift(passenger_bits, key_bits), bounds);
}

/* Sort bucket [begin, end) of (keys, rows) by the bits between the passenger and the top digit
 * (scratch: the same range of the scratch arrays), then decode its keys into sorted1,
 * sorted_type, sorted2 and sorted_passenger (which may be NULL). */
void openbench_sort_bucket(int64_t begin, int64_t end, int32_t rank_bits, int32_t type_bits, int32_t passenger_bits,
                           uint64_t *keys, uint32_t *rows, uint64_t *scratch_keys, uint32_t *scratch_rows,
                           uint32_t *sorted1, uint8_t *sorted_type, uint32_t *sorted2, uint32_t *sorted_passenger)
{
    const int32_t second_shift = passenger_bits, type_shift = second_shift + rank_bits;
    const int32_t first_shift = type_shift + type_bits, key_bits = first_shift + rank_bits;
    const int64_t n = end - begin;
    sort_digits(keys + begin, rows + begin, scratch_keys + begin, scratch_rows + begin, n, passenger_bits,
                top_shift(passenger_bits, key_bits));
    const uint64_t rank_mask = (1ULL << rank_bits) - 1, type_mask = (1ULL << type_bits) - 1;
    const uint64_t passenger_mask = passenger_bits ? (1ULL << passenger_bits) - 1 : 0;
    for (int64_t i = begin; i < end; ++i) {
        const uint64_t key = keys[i];
        sorted1[i] = (uint32_t)(key >> first_shift);
        sorted_type[i] = (uint8_t)((key >> type_shift) & type_mask);
        sorted2[i] = (uint32_t)((key >> second_shift) & rank_mask);
        if (sorted_passenger)
            sorted_passenger[i] = (uint32_t)(key & passenger_mask);
    }
}
