/*
 * x86-split-lock - an atomic add on a value that crosses a cache line.
 *
 * From the method in shared/claims.md E3 (Tokutek, "Packing for the
 * Holidays"): a 1024-byte buffer aligned to 1024; for an OFFSET given at run
 * time, update the 8-byte integers at OFFSET, OFFSET+64, ... while the
 * integer stays inside the buffer; repeat for a fixed time; report time per
 * update. Two variants: a plain add through a volatile pointer, and
 * __sync_fetch_and_add (on x86 a `lock add`). Offsets 57..63 straddle two
 * 64-byte lines.
 *
 * Variants:
 *   plain           *p += 1 through a volatile pointer
 *   locked          __sync_fetch_and_add(p, 1)
 *   packed-struct   the production bug: an array of packed
 *                   {uint64_t v; int x; char y;} (13 bytes), v updated with
 *                   __sync_fetch_and_add; some v straddle a line
 *   unpacked-struct the fix: the same struct unpacked (16 bytes)
 *
 * Keys: variant, offsets (a range lo-hi, one sample set per offset),
 * bufsize, line (only used to label straddling samples), target_us (the
 * "fixed time" of one sample), elems (struct variants).
 */
#include "trapline.h"

TL_ARGS({"variant", "locked", "[choice] plain|locked|packed-struct|unpacked-struct"},
        {"offsets", "0-63", "[range 0..65535] byte offsets to sweep, lo-hi (plain/locked)"},
        {"bufsize", "1024", "[int 16..16777216] bytes in the buffer (aligned to itself)"},
        {"line", "64", "[int 1..4096] cache line size used to label straddle=1 samples"},
        {"target_us", "20000", "[int 1..10000000] time one sample should take (fixed-time loop)"},
        {"elems", "64", "[int 1..1000000] struct elements (packed/unpacked-struct)"},
        {"iters", "0", "[int 0..1000000000000] passes per sample; 0 = grow until a sample lasts target_us (the timing model uses a fixed count)"});

struct packed_rec {
    uint64_t v;
    int x;
    char y;
} __attribute__((packed));

struct unpacked_rec {
    uint64_t v;
    int x;
    char y;
};

struct ctx {
    char *buf;
    long offset, bufsize;
    long stride;
    uint64_t iters; /* outer repetitions per sample */
    int locked;
    /* struct variants */
    uint64_t **fields;
    long nfields;
};

/* The loops are noinline and named so the test can disassemble exactly the
 * measured code (tests/20_kernels: `lock` prefix present in locked_sweep). */
__attribute__((noinline)) static uint64_t plain_sweep(char *buf, long offset, long bufsize, uint64_t iters)
{
    uint64_t n = 0;
    for (uint64_t it = 0; it < iters; it++) {
        for (long o = offset; o + 8 <= bufsize; o += 64) {
            volatile uint64_t *p = (volatile uint64_t *)(buf + o);
            *p += 1;
            n++;
        }
    }
    return n;
}

__attribute__((noinline)) static uint64_t locked_sweep(char *buf, long offset, long bufsize, uint64_t iters)
{
    uint64_t n = 0;
    for (uint64_t it = 0; it < iters; it++) {
        for (long o = offset; o + 8 <= bufsize; o += 64) {
            uint64_t *p = (uint64_t *)(buf + o);
            TL_HIDE(p);
            __sync_fetch_and_add(p, 1);
            n++;
        }
    }
    return n;
}

__attribute__((noinline)) static uint64_t struct_sweep(uint64_t **fields, long nfields, uint64_t iters)
{
    uint64_t n = 0;
    for (uint64_t it = 0; it < iters; it++) {
        for (long i = 0; i < nfields; i++) {
            uint64_t *p = fields[i];
            TL_HIDE(p);
            __sync_fetch_and_add(p, 1);
            n++;
        }
    }
    return n;
}

static uint64_t body(void *vc)
{
    struct ctx *c = vc;
    if (c->fields)
        return struct_sweep(c->fields, c->nfields, c->iters);
    if (c->locked)
        return locked_sweep(c->buf, c->offset, c->bufsize, c->iters);
    return plain_sweep(c->buf, c->offset, c->bufsize, c->iters);
}

/* Fixed-time loop, as in the original: grow the repetition count until one
 * sample takes at least target_us. */
static void calibrate(struct ctx *c, uint64_t target_ns)
{
    c->iters = 1;
    for (;;) {
        uint64_t t0 = tl_now_ns();
        body(c);
        uint64_t dt = tl_now_ns() - t0;
        if (dt >= target_ns / 2 || c->iters > (1ull << 40)) {
            if (dt > 0)
                c->iters = c->iters * target_ns / dt + 1;
            return;
        }
        c->iters *= (dt < target_ns / 64) ? 8 : 2;
    }
}

int main(int argc, char **argv)
{
    /* The preamble stays written out (not tl_start): see trapline.h, the model lanes. */
    tl_exp = "x86-split-lock";
    tl_parse_args(argc, argv, args);
    const char *variant = tl_choice(args, "variant", "plain|locked|packed-struct|unpacked-struct");
    int quick = tl_int(args, "quick");
    int reps = tl_int(args, "reps"), warmup = tl_int(args, "warmup");
    long bufsize = tl_int(args, "bufsize"), line = tl_int(args, "line");
    uint64_t target_ns = (uint64_t)tl_int(args, "target_us") * 1000;
    if (quick && !tl_given(args, "target_us"))
        target_ns = 2000 * 1000;
    uint64_t fixed_iters = (uint64_t)tl_int(args, "iters");
    long lo, hi;
    if (sscanf(tl_str(args, "offsets"), "%ld-%ld", &lo, &hi) != 2) {
        if (sscanf(tl_str(args, "offsets"), "%ld", &lo) != 1) {
            fprintf(stderr, "%s: offsets=%s is not N or LO-HI\n", tl_exp, tl_str(args, "offsets"));
            return 2;
        }
        hi = lo;
    }
    if (lo < 0 || hi < lo || hi + 8 > bufsize || bufsize <= 0 || (bufsize & (bufsize - 1)) || line <= 0) {
        fprintf(stderr, "%s: need 0 <= lo <= hi, hi+8 <= bufsize, bufsize a power of two\n", tl_exp);
        return 2;
    }
    tl_timer_check();
    printf("TL exp=%s kind=info arch=%s bufsize=%ld line=%ld target_ns=%" PRIu64 "\n", tl_exp, TL_ARCH,
           bufsize, line, target_ns);

    char *buf = tl_aligned_alloc(bufsize, bufsize);
    struct ctx c = {.buf = buf, .bufsize = bufsize, .stride = 64};
    char params[128];

    if (!strcmp(variant, "plain") || !strcmp(variant, "locked")) {
        c.locked = !strcmp(variant, "locked");
        for (long off = lo; off <= hi; off++) {
            c.offset = off;
            if (fixed_iters)
                c.iters = fixed_iters;
            else
                calibrate(&c, target_ns);
            int straddle = (off % line) + 8 > line;
            snprintf(params, sizeof params, "offset=%ld straddle=%d iters=%" PRIu64, off, straddle, c.iters);
            tl_measure(variant, params, warmup, reps, body, &c);
        }
    } else {
        int packed = !strcmp(variant, "packed-struct");
        long elems = tl_int(args, "elems");
        size_t recsize = packed ? sizeof(struct packed_rec) : sizeof(struct unpacked_rec);
        char *arr = tl_aligned_alloc(4096, recsize * elems + 64);
        c.fields = calloc(elems, sizeof *c.fields);
        c.nfields = elems;
        long straddlers = 0;
        for (long i = 0; i < elems; i++) {
            uintptr_t a = (uintptr_t)(arr + i * recsize); /* v is the first field */
            c.fields[i] = (uint64_t *)a;
            if ((a % line) + 8 > (uintptr_t)line)
                straddlers++;
        }
        if (fixed_iters)
            c.iters = fixed_iters;
        else
            calibrate(&c, target_ns);
        snprintf(params, sizeof params, "recsize=%zu elems=%ld straddlers=%ld iters=%" PRIu64, recsize, elems,
                 straddlers, c.iters);
        tl_count(variant, "straddlers", straddlers, params);
        tl_measure(variant, params, warmup, reps, body, &c);
    }
    return 0;
}
