/*
 * replay - perform a recorded list of loads and stores, for the cache-model
 * test (tests/test_80_model_plugin.py): the same list is replayed into
 * pycachesim and the per-level hits and misses must agree exactly.
 *
 *   replay OPS_FILE
 *
 * OPS_FILE (in the guest's byte order): a header {uint32 magic 'TLOP', uint32 count,
 * uint64 span} and count records {uint32 offset; uint8 size; uint8 store;
 * uint16 pad}. The buffer of span bytes is page aligned; each record is one
 * access of size 1, 2, 4 or 8 bytes at buffer + offset (any alignment, so
 * some straddle two lines), done inside one region of interest
 * (TL_ROI_BEGIN/TL_ROI_END). Prints "buf=0x..." on stdout.
 * Build: gcc -O1 -static -I kernels/common replay.c
 */
#include "trapline.h"

struct op {
    uint32_t offset;
    uint8_t size;
    uint8_t store;
    uint16_t pad;
};

__attribute__((noinline)) static uint64_t run(unsigned char *buf, const struct op *ops, uint32_t n)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < n; i++) {
        unsigned char *p = buf + ops[i].offset;
        if (ops[i].store) {
            switch (ops[i].size) {
            case 1: *(volatile uint8_t *)p = (uint8_t)i; break;
            case 2: *(volatile uint16_t *)p = (uint16_t)i; break;
            case 4: *(volatile uint32_t *)p = i; break;
            default: *(volatile uint64_t *)p = i; break;
            }
        } else {
            switch (ops[i].size) {
            case 1: sum += *(volatile uint8_t *)p; break;
            case 2: sum += *(volatile uint16_t *)p; break;
            case 4: sum += *(volatile uint32_t *)p; break;
            default: sum += *(volatile uint64_t *)p; break;
            }
        }
    }
    return sum;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: replay OPS_FILE\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    uint32_t hdr[2];
    uint64_t span;
    if (!f || fread(hdr, 4, 2, f) != 2 || fread(&span, 8, 1, f) != 1 || hdr[0] != 0x504f4c54u) {
        fprintf(stderr, "replay: %s is not an ops file\n", argv[1]);
        return 2;
    }
    struct op *ops = malloc((size_t)hdr[1] * sizeof *ops + 1);
    if (!ops || fread(ops, sizeof *ops, hdr[1], f) != hdr[1]) {
        fprintf(stderr, "replay: short ops file\n");
        return 2;
    }
    fclose(f);
    unsigned char *buf = tl_aligned_alloc(4096, span + 8);
    printf("buf=%#lx ops=%#lx n=%u\n", (unsigned long)buf, (unsigned long)ops, hdr[1]);
    fflush(stdout);
    TL_ROI_BEGIN();
    uint64_t s = run(buf, ops, hdr[1]);
    TL_ROI_END();
    printf("sum=%lu\n", (unsigned long)s);
    return 0;
}
