/*
 * miss-overlap - how many cache misses a core has in flight at once: nine
 * access patterns, one 8-byte access per cache line, in ns per access.
 *
 * Not a claim of the catalogue: the validation experiment of the timing
 * model's overlap (model/plugin/timing.c), run on the host, the model and
 * gem5 beside the machine's Little's-law bound (kernels/miss-overlap/README.md).
 *
 * Variants (variant=):
 *   chase      one dependent pointer chase: each load's address is the value
 *              the previous load returned (a random cycle of nodes, one per
 *              4 KiB page, so that no prefetcher brings the next one in)
 *   chase2     two independent chases, interleaved in one loop
 *   chase4     four independent chases, interleaved
 *   stream     one load per line, ascending
 *   stride128  one load per 128 bytes, ascending
 *   stride4k   one load per 4 KiB (a new page each), ascending
 *   gather     one load per line at random lines (one line in 8 of the
 *              window), the line indexes read from an array (an index stream
 *              and independent gathered loads)
 *   store      one store per line, ascending
 *   l2stream   one load per line, ascending, over a window that fits the L2
 *              (l2_kib) but not the L1D: warm in the L2 before each run
 *
 * Every run touches a window of lines no earlier run touched, so its lines
 * come from memory (l2stream: from the L2). The pages are all touched once at
 * the start, at their last byte (no page fault in a run; no variant reads that
 * line); what is built before (the chases' nodes, the gather's index array)
 * leaves the caches by a flush before each run, one load per line of
 * flush_mib MiB, more than the last-level cache.
 * Keys: n (accesses per run), flush_mib, l2_kib, seed. ops = accesses.
 */
#include "trapline.h"
#include <sys/mman.h>
#include <unistd.h>

TL_ARGS({"variant", "chase", "[choice] chase|chase2|chase4|stream|stride128|stride4k|gather|store|l2stream"},
        {"n", "16384", "[int 64..16777216] accesses per run (quick: 4096)"},
        {"flush_mib", "48", "[int 1..4096] MiB read between building and running, more than the last-level cache"},
        {"l2_kib", "128", "[int 4..65536] l2stream: the window, in the L2 but larger than the L1D"},
        {"seed", "1", "[int 1..2147483647] the chases' and the gather's random lines"});

#define LINE 64
#define PAGE 4096
#define GATHER_SPREAD 8 /* gather: the window has this many lines per access */

struct node {
    struct node *next;
};

struct ctx {
    const char *variant;
    unsigned char *buf;      /* windows, then the flush region */
    size_t windows;          /* bytes of every run's window: the flush region starts there */
    size_t window;           /* bytes of one run's window */
    size_t flush;            /* bytes of the flush region */
    long n;                  /* accesses per run */
    int run;                 /* the run (warm-ups included) */
    int chains;              /* chase: 1, 2, 4 */
    struct node **heads;     /* chase: [run][chain] */
    uint32_t **idx;          /* gather: [run][i] a line index in the run's window */
    uint64_t sink;
};

static uint64_t rng_state;
static uint32_t rnd(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

/* a random permutation of 0..n-1 */
static uint32_t *permutation(long n)
{
    uint32_t *p = malloc((size_t)n * sizeof *p);
    if (!p) {
        fprintf(stderr, "%s: out of memory\n", tl_exp);
        exit(1);
    }
    for (long i = 0; i < n; i++)
        p[i] = (uint32_t)i;
    for (long i = n - 1; i > 0; i--) {
        long j = (long)(rnd() % (uint32_t)(i + 1));
        uint32_t t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
    return p;
}

static unsigned char *window_of(struct ctx *c, int run)
{
    return c->buf + (size_t)run * c->window;
}

/* chase: one node in each page of the run's window (at a line that varies from page to page, so that
 * the nodes do not all fall in the same cache sets), the pages split into `chains` parts, each a
 * random cycle: no node shares a page with another, so no prefetcher that stays in a page (or fetches
 * the other line of a pair) brings one in, and every step waits for the one before */
static unsigned char *node_at(unsigned char *w, long page)
{
    return w + (size_t)page * PAGE + (size_t)((page * 37 + 11) % (PAGE / LINE)) * LINE;
}

static void build_chains(struct ctx *c, int run)
{
    long per = c->n / c->chains;
    for (int k = 0; k < c->chains; k++) {
        unsigned char *base = window_of(c, run) + (size_t)k * per * PAGE;
        uint32_t *p = permutation(per);
        for (long i = 0; i < per; i++)
            ((struct node *)node_at(base, p[i]))->next = (struct node *)node_at(base, p[(i + 1) % per]);
        c->heads[run * 4 + k] = (struct node *)node_at(base, p[0]);
        free(p);
    }
}

static void flush(struct ctx *c)
{
    uint64_t s = 0;
    for (size_t off = 0; off < c->flush; off += LINE)
        s += *(volatile uint64_t *)(c->buf + c->windows + off);
    c->sink += s;
}

__attribute__((noinline)) static uint64_t run_chase(struct ctx *c)
{
    struct node *p0 = c->heads[c->run * 4], *p1 = c->heads[c->run * 4 + 1];
    struct node *p2 = c->heads[c->run * 4 + 2], *p3 = c->heads[c->run * 4 + 3];
    long steps = c->n / c->chains;
    if (c->chains == 1)
        for (long i = 0; i < steps; i++)
            p0 = p0->next;
    else if (c->chains == 2)
        for (long i = 0; i < steps; i++) {
            p0 = p0->next;
            p1 = p1->next;
        }
    else
        for (long i = 0; i < steps; i++) {
            p0 = p0->next;
            p1 = p1->next;
            p2 = p2->next;
            p3 = p3->next;
        }
    c->sink += (uintptr_t)p0 ^ (uintptr_t)p1 ^ (uintptr_t)p2 ^ (uintptr_t)p3;
    return (uint64_t)steps * c->chains;
}

__attribute__((noinline)) static uint64_t run_stride(struct ctx *c, const unsigned char *w, size_t stride)
{
    uint64_t s = 0;
    for (long i = 0; i < c->n; i++)
        s += *(const uint64_t *)(w + (size_t)i * stride);
    c->sink += s;
    return (uint64_t)c->n;
}

__attribute__((noinline)) static uint64_t run_store(struct ctx *c, unsigned char *w)
{
    for (long i = 0; i < c->n; i++)
        *(uint64_t *)(w + (size_t)i * LINE) = (uint64_t)i;
    return (uint64_t)c->n;
}

__attribute__((noinline)) static uint64_t run_gather(struct ctx *c, const unsigned char *w, const uint32_t *idx)
{
    uint64_t s = 0;
    for (long i = 0; i < c->n; i++)
        s += *(const uint64_t *)(w + (size_t)idx[i] * LINE);
    c->sink += s;
    return (uint64_t)c->n;
}

static void setup(void *vc)
{
    struct ctx *c = vc;
    c->run++;
    if (!strcmp(c->variant, "l2stream"))
        run_stride(c, c->buf, LINE); /* into the L2 (and the L1D, which it overflows) */
    else
        flush(c); /* chase, gather: the nodes and indexes just built leave the caches */
}

static uint64_t body(void *vc)
{
    struct ctx *c = vc;
    const char *v = c->variant;
    unsigned char *w = window_of(c, c->run);
    if (!strncmp(v, "chase", 5))
        return run_chase(c);
    if (!strcmp(v, "stream"))
        return run_stride(c, w, LINE);
    if (!strcmp(v, "stride128"))
        return run_stride(c, w, 128);
    if (!strcmp(v, "stride4k"))
        return run_stride(c, w, 4096);
    if (!strcmp(v, "gather"))
        return run_gather(c, w, c->idx[c->run]);
    if (!strcmp(v, "store"))
        return run_store(c, w);
    return run_stride(c, c->buf, LINE); /* l2stream: the same window every run */
}

int main(int argc, char **argv)
{
    tl_exp = "miss-overlap";
    tl_parse_args(argc, argv, args);
    const char *variant =
        tl_choice(args, "variant", "chase|chase2|chase4|stream|stride128|stride4k|gather|store|l2stream");
    int quick = tl_int(args, "quick");
    int reps = tl_int(args, "reps"), warmup = tl_int(args, "warmup");
    long n = quick && !tl_given(args, "n") ? 4096 : tl_int(args, "n");
    long flush_mib = tl_int(args, "flush_mib"), l2_kib = tl_int(args, "l2_kib");
    rng_state = (uint64_t)tl_int(args, "seed");
    if (n < 64 || n > 16777216 || reps < 1 || warmup < 0) {
        fprintf(stderr, "%s: need 64 <= n <= 16777216, reps >= 1, warmup >= 0\n", tl_exp);
        return 2;
    }
    tl_timer_check();

    struct ctx c = {.variant = variant, .n = n, .run = -1, .chains = 1};
    if (!strcmp(variant, "chase2"))
        c.chains = 2;
    else if (!strcmp(variant, "chase4"))
        c.chains = 4;
    size_t stride = !strcmp(variant, "stride128")  ? 128
                    : !strcmp(variant, "stride4k") || !strncmp(variant, "chase", 5) ? PAGE
                    : !strcmp(variant, "gather")   ? LINE * GATHER_SPREAD
                                                   : LINE;
    int runs = warmup + reps;
    c.window = !strcmp(variant, "l2stream") ? (size_t)l2_kib << 10 : (size_t)n * stride;
    if (!strcmp(variant, "l2stream")) {
        c.n = (long)(c.window / LINE);
        runs = 1;
    }
    /* only what was built (the chases' nodes, the gather's indexes) is in the caches: the other
     * variants' windows were touched at one byte per page, on a line they do not read */
    c.flush = !strncmp(variant, "chase", 5) || !strcmp(variant, "gather") ? (size_t)flush_mib << 20 : 0;
    size_t windows = c.window * (size_t)runs; /* one window per run; the flush region after them */
    c.windows = windows;
    size_t bytes = windows + c.flush;
    c.buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (c.buf == MAP_FAILED) {
        fprintf(stderr, "%s: cannot map %zu bytes\n", tl_exp, bytes);
        return 1;
    }
    long page = sysconf(_SC_PAGESIZE);
    for (size_t off = 0; off < (size_t)runs * c.window; off += (size_t)page)
        c.buf[off + (size_t)page - 1] = 1; /* every page of the windows, at its last byte */
    for (size_t off = 0; off < c.flush; off += (size_t)page)
        c.buf[windows + off] = 1;
    c.heads = calloc((size_t)runs * 4, sizeof *c.heads);
    c.idx = calloc((size_t)runs, sizeof *c.idx);
    for (int r = 0; r < runs && !strncmp(variant, "chase", 5); r++)
        build_chains(&c, r);
    for (int r = 0; r < runs && !strcmp(variant, "gather"); r++) {
        uint32_t *p = permutation(n * GATHER_SPREAD); /* n lines of the window, each once, in random order */
        c.idx[r] = p;
    }
    printf("TL exp=%s kind=info arch=%s variant=%s n=%ld window_bytes=%zu flush_bytes=%zu stride=%zu line=%d\n", tl_exp,
           TL_ARCH, variant, c.n, c.window, c.flush, stride, LINE);

    char params[64];
    snprintf(params, sizeof params, "n=%ld", c.n);
    tl_measure_setup(variant, params, warmup, reps, setup, body, &c);
    tl_check(variant, params, "%s", "ok");
    TL_USE(c.sink);
    return 0;
}
