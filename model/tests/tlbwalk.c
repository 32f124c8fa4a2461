/*
 * tlbwalk - page walks for the TLB-model test (tests/test_80_model_plugin.py).
 *
 *   tlbwalk mode=cycle|random pages=P stride=S reps=R n=N seed=X page=BYTES
 *
 * Maps (untouched) P*S pages of BYTES each (P a power of two) and, inside
 * one region of interest, loads one byte from pages 0, S, 2S, ...:
 *   cycle   R passes over the P pages in one fixed cyclic order: page
 *           x -> (a*x + c) mod P, a full-period LCG (a = 1, c = 1 for
 *           seed=0: ascending; a = 4*seed+1, c = 2*seed+1 otherwise);
 *   random  N loads from pages drawn uniformly (xorshift64, seed X).
 * The markers sit inside the walking functions, after their prologue, and
 * the loops keep everything in registers: the region's only data accesses
 * are these loads. Prints "base=0x... loads=<n>".
 * Build: gcc -O1 -static -I kernels/common tlbwalk.c
 */
#include "trapline.h"
#include <sys/mman.h>

__attribute__((noinline)) static uint64_t walk_cycle(const unsigned char *base, unsigned long pages,
                                                      unsigned long step, long reps, unsigned long a,
                                                      unsigned long c)
{
    uint64_t s = 0;
    unsigned long x = 0;
    TL_ROI_BEGIN();
    for (long r = 0; r < reps; r++)
        for (unsigned long i = 0; i < pages; i++) {
            s += *(volatile const unsigned char *)(base + x * step);
            x = (a * x + c) & (pages - 1);
        }
    TL_ROI_END();
    return s;
}

__attribute__((noinline)) static uint64_t walk_random(const unsigned char *base, unsigned long pages,
                                                       unsigned long step, long n, uint64_t x)
{
    uint64_t s = 0;
    TL_ROI_BEGIN();
    for (long i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s += *(volatile const unsigned char *)(base + (x & (pages - 1)) * step);
    }
    TL_ROI_END();
    return s;
}

int main(int argc, char **argv)
{
    long pages = 64, stride = 1, reps = 4, n = 10000, page = 4096;
    unsigned long seed = 0;
    char mode[16] = "cycle";
    for (int i = 1; i < argc; i++)
        if (sscanf(argv[i], "mode=%15s", mode) != 1 && sscanf(argv[i], "pages=%ld", &pages) != 1 &&
            sscanf(argv[i], "stride=%ld", &stride) != 1 && sscanf(argv[i], "reps=%ld", &reps) != 1 &&
            sscanf(argv[i], "n=%ld", &n) != 1 && sscanf(argv[i], "seed=%lu", &seed) != 1 &&
            sscanf(argv[i], "page=%ld", &page) != 1) {
            fprintf(stderr, "tlbwalk: bad argument %s\n", argv[i]);
            return 2;
        }
    if (pages < 1 || (pages & (pages - 1))) {
        fprintf(stderr, "tlbwalk: pages=%ld is not a power of two\n", pages);
        return 2;
    }
    unsigned long step = (unsigned long)stride * page;
    size_t len = (size_t)pages * step;
    unsigned char *m = mmap(NULL, len + page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    /* aligned to the model's page size */
    unsigned char *base = (unsigned char *)(((uintptr_t)m + page - 1) & ~(uintptr_t)(page - 1));
    long loads;
    uint64_t s;
    if (!strcmp(mode, "cycle")) {
        loads = pages * reps;
        s = walk_cycle(base, (unsigned long)pages, step, reps, seed ? 4 * seed + 1 : 1, seed ? 2 * seed + 1 : 1);
    } else {
        loads = n;
        s = walk_random(base, (unsigned long)pages, step, n, seed ? seed : 88172645463325252ull);
    }
    printf("base=%#lx loads=%ld sum=%lu\n", (unsigned long)base, loads, (unsigned long)s);
    return 0;
}
