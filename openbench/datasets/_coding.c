/* Label coding at scale (openbench.datasets.coding), loaded with ctypes (no Python headers needed).
 *
 * Grouping of 64-bit keys (the labels' hashes) by an open-addressing hash table:
 * openbench_group_keys numbers the distinct keys of keys[0, n) in order of first occurrence:
 * group_of_row[i] is the group of row i, first_row[g] the row where group g first occurs (the
 * caller's buffer may be n long; only the first `groups` entries are written). One pass over the
 * keys; the table (slots of key and group, side by side so that a probe touches one cache line)
 * starts small and doubles when it is half full, and the slot of the key PREFETCH rows ahead is
 * prefetched, so the random probes overlap instead of waiting on memory one by one. Returns the
 * number of groups, or -1 when memory for the table cannot be had.
 *
 * Rendering of the fingerprint's lines: openbench_render_lines writes, for rows order[begin ..
 * end), the line  prefix TAB entity(head) TAB relation(kind) TAB entity(tail) NEWLINE  with the
 * labels taken from one byte blob per table (label i is blob[offsets[i] .. offsets[i + 1])), as
 * many whole lines as fit in out[0, capacity); *written is their length and the return value the
 * first row not written (== begin: not even one line fits).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PREFETCH 16
#define INITIAL_BITS 16

typedef struct {
    uint64_t key;
    int64_t group; /* -1: empty */
} slot_t;

/* splitmix64's finaliser: the keys' low bits need not be uniform for every hash function */
static inline uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static slot_t *empty_table(uint64_t capacity)
{
    slot_t *table = malloc(capacity * sizeof(slot_t));
    if (table == NULL)
        return NULL;
    for (uint64_t s = 0; s < capacity; ++s)
        table[s].group = -1;
    return table;
}

/* the table of twice the capacity, every occupied slot moved over (the old one freed); NULL, the
 * old one kept, when out of memory */
static slot_t *grown(slot_t *table, uint64_t capacity)
{
    const uint64_t larger = capacity * 2, mask = larger - 1;
    slot_t *bigger = empty_table(larger);
    if (bigger == NULL)
        return NULL;
    for (uint64_t s = 0; s < capacity; ++s) {
        if (table[s].group < 0)
            continue;
        uint64_t t = mix(table[s].key) & mask;
        while (bigger[t].group >= 0)
            t = (t + 1) & mask;
        bigger[t] = table[s];
    }
    free(table);
    return bigger;
}

int64_t openbench_group_keys(const uint64_t *keys, int64_t n, int64_t *group_of_row, int64_t *first_row)
{
    uint64_t capacity = (uint64_t)1 << INITIAL_BITS, mask = capacity - 1;
    slot_t *table = empty_table(capacity);
    if (table == NULL)
        return -1;
    int64_t groups = 0;
    for (int64_t i = 0; i < n; ++i) {
        if (i + PREFETCH < n)
            __builtin_prefetch(&table[mix(keys[i + PREFETCH]) & mask]);
        const uint64_t key = keys[i];
        uint64_t s = mix(key) & mask;
        for (;;) {
            const int64_t group = table[s].group;
            if (group < 0) {
                table[s].key = key;
                table[s].group = groups;
                first_row[groups] = i;
                group_of_row[i] = groups++;
                break;
            }
            if (table[s].key == key) {
                group_of_row[i] = group;
                break;
            }
            s = (s + 1) & mask;
        }
        if ((uint64_t)groups * 2 > capacity) { /* keep the load at most one half: short probe runs */
            slot_t *bigger = grown(table, capacity);
            if (bigger == NULL) {
                free(table);
                return -1;
            }
            table = bigger;
            capacity *= 2;
            mask = capacity - 1;
        }
    }
    free(table);
    return groups;
}

static inline char *put(char *at, const char *blob, const int64_t *offsets, int64_t label)
{
    const int64_t length = offsets[label + 1] - offsets[label];
    memcpy(at, blob + offsets[label], (size_t)length);
    return at + length;
}

int64_t openbench_render_lines(const char *prefix, int64_t prefix_length, const char *entity_blob,
                               const int64_t *entity_offsets, const char *relation_blob,
                               const int64_t *relation_offsets, const int64_t *heads, const int64_t *kinds,
                               const int64_t *tails, const int64_t *order, int64_t begin, int64_t end, char *out,
                               int64_t capacity, int64_t *written)
{
    char *at = out;
    const char *limit = out + capacity;
    int64_t i = begin;
    for (; i < end; ++i) {
        /* the rows are in sorted order, their codes scattered: fetch a row's codes far ahead, its
         * labels' offsets nearer (the codes have arrived by then) */
        if (i + 2 * PREFETCH < end) {
            const int64_t ahead = order[i + 2 * PREFETCH];
            __builtin_prefetch(&heads[ahead]);
            __builtin_prefetch(&kinds[ahead]);
            __builtin_prefetch(&tails[ahead]);
        }
        if (i + PREFETCH < end) {
            const int64_t ahead = order[i + PREFETCH];
            __builtin_prefetch(&entity_offsets[heads[ahead]]);
            __builtin_prefetch(&entity_offsets[tails[ahead]]);
        }
        const int64_t row = order[i], head = heads[row], kind = kinds[row], tail = tails[row];
        const int64_t length = prefix_length + 4 + (entity_offsets[head + 1] - entity_offsets[head]) +
                               (relation_offsets[kind + 1] - relation_offsets[kind]) +
                               (entity_offsets[tail + 1] - entity_offsets[tail]);
        if (length > limit - at)
            break;
        memcpy(at, prefix, (size_t)prefix_length);
        at += prefix_length;
        *at++ = '\t';
        at = put(at, entity_blob, entity_offsets, head);
        *at++ = '\t';
        at = put(at, relation_blob, relation_offsets, kind);
        *at++ = '\t';
        at = put(at, entity_blob, entity_offsets, tail);
        *at++ = '\n';
    }
    *written = at - out;
    return i;
}
