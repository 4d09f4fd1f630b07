/* Delimited text from dictionary-coded columns: the writer's inner loop, loaded with ctypes (no
 * Python headers needed). Row i of the output is source row order[i] (or i when order is NULL);
 * its field in column c is dictionary entry codes[c][row] of that column, the bytes
 * blobs[c][offsets[c][k] .. offsets[c][k + 1]). Entries come already quoted where the format
 * needs it, so this only copies bytes. The caller sizes `out` for the longest possible rows;
 * ctypes releases the GIL, so chunks of rows are formatted on several threads.
 */
#include <stdint.h>
#include <string.h>

int64_t openbench_format_rows(const uint32_t *order, int64_t begin, int64_t end, int32_t columns,
                              const uint32_t *const *codes, const int64_t *const *offsets,
                              const char *const *blobs, char separator, char *out)
{
    char *cursor = out;
    for (int64_t i = begin; i < end; ++i) {
        const int64_t row = order ? (int64_t)order[i] : i;
        for (int32_t c = 0; c < columns; ++c) {
            const uint32_t entry = codes[c][row];
            const int64_t start = offsets[c][entry];
            const int64_t length = offsets[c][entry + 1] - start;
            memcpy(cursor, blobs[c] + start, (size_t)length);
            cursor += length;
            *cursor++ = (c + 1 < columns) ? separator : '\n';
        }
    }
    return (int64_t)(cursor - out);
}
