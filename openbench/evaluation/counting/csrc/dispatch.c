/* Which instruction set the passes use: the best the CPU has (AVX-512F, else AVX2, else the
 * portable loops), chosen once; tests force each one the CPU has through openbench_chunk_scan and
 * compare them. Every pass asks chosen_isa() (counting.h). */
#include "counting.h"

/* -1: not chosen yet; 0: the portable scan; 1: AVX-512; 2: AVX2 */
OB_INTERNAL int ob_scan_isa = -1;
static int best_isa = -1;

OB_INTERNAL int ob_best_isa(void)
{
    if (best_isa < 0) {
#ifdef HAVE_AVX512_SCAN
        __builtin_cpu_init();
        best_isa = __builtin_cpu_supports("avx512f") ? 1 : __builtin_cpu_supports("avx2") ? 2 : 0;
#else
        best_isa = 0;
#endif
    }
    return best_isa;
}

OB_INTERNAL int ob_choose_isa(void)
{
    if (ob_scan_isa < 0) ob_scan_isa = ob_best_isa();
    return ob_scan_isa;
}

/* Which scan the chunk count uses: 0 the portable one, 1 AVX-512, 2 AVX2, each only where the
 * CPU has it (an AVX-512 CPU has AVX2 too; tests force each one it has and compare them);
 * returns the one now in use. A negative value only asks. */
int openbench_chunk_scan(int isa)
{
    if (isa >= 0) {
        const int best = ob_best_isa();
        ob_scan_isa = isa == 0 ? 0 : isa == 1 ? (best == 1 ? 1 : 0) : (best != 0 ? 2 : 0);
    }
    return chosen_isa();
}
