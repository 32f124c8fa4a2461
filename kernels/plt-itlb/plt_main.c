/*
 * plt-itlb - the cost of calls through the PLT, and of one library per
 * routine (one new page, and ITLB entry, per call).
 *
 * From the method in shared/claims.md E7: 26 routines a -> b -> ... -> z,
 * each calling the next (chain.c), timed in four builds:
 *
 *   plt-exe       all routines in the (static) executable
 *   plt-onelib    all routines in one shared library, libplt-chain.so; the
 *                 calls between them go through its PLT
 *   plt-internal  one shared library, libplt-internal.so, routines static
 *                 except the entry: no PLT between routines
 *   plt-perlib    each routine in its own shared library, libplt_a.so ..
 *                 libplt_z.so: every call goes through a PLT into another
 *                 library's pages
 *
 * The dynamic builds find their libraries next to the executable (rpath
 * $ORIGIN). In all three the executable reaches a() itself through its own
 * PLT: one PLT call per 26 routine calls, the same in each.
 *
 * Keys: calls (calls of a() per sample). ops = calls x 26 routine calls.
 * copies=K (default 1): K - 1 more processes run the same chain without end
 * while this one measures (forked before the first sample, killed after the
 * last): K copies sharing whatever this CPU has (on a one-CPU guest, Linux
 * time-slices them). The children count their calls of a() in shared memory;
 * a sample's ops are then the routine calls of all K copies during it, so
 * its time per op is the CPU's time per routine call, whichever copy made
 * it.
 * Output: kind=info with the number of distinct pages holding the 26 routine
 * entry points; kind=check comparing the sum of a()'s results with the same
 * sum computed without the chain.
 */
#include "trapline.h"
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(PLT_PERLIB)
#include <dlfcn.h>
#endif

#if defined(PLT_EXE)
#define VARIANT "exe"
#elif defined(PLT_ONELIB)
#define VARIANT "onelib"
#elif defined(PLT_INTERNAL)
#define VARIANT "internal"
#elif defined(PLT_PERLIB)
#define VARIANT "perlib"
#else
#error "build with one of -DPLT_EXE, -DPLT_ONELIB, -DPLT_INTERNAL, -DPLT_PERLIB"
#endif

TL_ARGS({"calls", "25000000", "[int 1..1000000000000] calls of the entry a() per sample, 26 routine calls each (quick: 100000)"},
        {"copies", "1", "[int 1..64] processes running the chain at once: this one measures, copies - 1 more run it without end; ops count all copies' calls"});

#define CHAIN_LEN 26

extern unsigned a(unsigned);
#if !defined(PLT_PERLIB)
extern void plt_chain_addrs(const void **out);
#endif

struct ctx {
    uint64_t calls;
    unsigned sum;
    int children;
    volatile uint64_t *counts; /* calls of a() made by each child so far */
};

/* The measured loop: one call of the entry per iteration. */
__attribute__((noinline)) static unsigned call_loop(uint64_t calls)
{
    unsigned sum = 0;
    for (uint64_t i = 0; i < calls; i++)
        sum += a((unsigned)i);
    return sum;
}

/* A child copy: the same chain, counting its calls of a(), until killed. */
__attribute__((noinline, noreturn)) static void child_loop(volatile uint64_t *count)
{
    unsigned sum = 0;
    for (uint64_t i = 0;; i++) {
        sum += a((unsigned)i);
        *count = i + 1;
        TL_USE(sum);
    }
}

static uint64_t children_calls(const struct ctx *c)
{
    uint64_t n = 0;
    for (int k = 0; k < c->children; k++)
        n += c->counts[k];
    return n;
}

static uint64_t body(void *vc)
{
    struct ctx *c = vc;
    uint64_t before = c->children ? children_calls(c) : 0;
    c->sum = call_loop(c->calls);
    uint64_t others = c->children ? children_calls(c) - before : 0;
    return (c->calls + others) * CHAIN_LEN;
}

static int cmp_addr(const void *x, const void *y)
{
    uintptr_t p = *(const uintptr_t *)x, q = *(const uintptr_t *)y;
    return p < q ? -1 : p > q;
}

int main(int argc, char **argv)
{
    struct tl_opts o = tl_start("plt-itlb", argc, argv, args);
    long long calls = tl_quick_int(args, "calls", o.quick, 100000);
    if (calls < 1)
        tl_fail("calls must be >= 1");
    long long copies = tl_int(args, "copies");
    if (copies < 1 || copies > 64)
        tl_fail("copies must be 1..64");

    /* Where the routines are: the number of distinct pages their entry
     * points occupy (1 or 2 when they share a text section, 26 per-lib). */
    uintptr_t addr[CHAIN_LEN];
#if defined(PLT_PERLIB)
    for (int i = 0; i < CHAIN_LEN; i++) {
        char name[16];
        snprintf(name, sizeof name, "plt_addr_%c", 'a' + i);
        const void *(*get)(void) = (const void *(*)(void))dlsym(RTLD_DEFAULT, name);
        addr[i] = get ? (uintptr_t)get() : 0;
    }
#else
    const void *ptrs[CHAIN_LEN];
    plt_chain_addrs(ptrs);
    for (int i = 0; i < CHAIN_LEN; i++)
        addr[i] = (uintptr_t)ptrs[i];
#endif
    long page = sysconf(_SC_PAGESIZE);
    qsort(addr, CHAIN_LEN, sizeof addr[0], cmp_addr);
    int pages = 0, found = 0;
    for (int i = 0; i < CHAIN_LEN; i++) {
        if (!addr[i])
            continue;
        if (!found || addr[i] / page != addr[i - 1] / page)
            pages++;
        found++;
    }
    tl_header("build=%s routines=%d routines_found=%d routine_pages=%d page=%ld span_bytes=%" PRIuPTR, VARIANT,
              CHAIN_LEN, found, pages, page, found ? addr[CHAIN_LEN - 1] - addr[CHAIN_LEN - found] : (uintptr_t)0);

    struct ctx c = {.calls = calls, .children = (int)copies - 1};
    pid_t kids[64];
    if (c.children) {
        c.counts = mmap(NULL, 64 * sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (c.counts == MAP_FAILED)
            tl_fail("mmap of the children's counters failed");
        fflush(stdout);
        for (int k = 0; k < c.children; k++) {
            kids[k] = fork();
            if (kids[k] < 0)
                tl_fail("fork failed");
            if (kids[k] == 0)
                child_loop(&c.counts[k]);
        }
        /* every child has started its chain before the first sample */
        for (int k = 0; k < c.children; k++)
            while (!c.counts[k])
                sched_yield();
    }
    char params[96];
    snprintf(params, sizeof params, "calls=%lld chain=%d copies=%lld", calls, CHAIN_LEN, copies);
    tl_measure(VARIANT, params, o.warmup, o.reps, body, &c);
    for (int k = 0; k < c.children; k++) {
        kill(kids[k], SIGKILL);
        waitpid(kids[k], NULL, 0);
    }

    /* a(x) = z(x) + 25, z(x) = (x ^ (x >> 3)) * 5 */
    unsigned want = 0;
    for (uint64_t i = 0; i < (uint64_t)calls; i++) {
        unsigned x = (unsigned)i;
        want += (x ^ (x >> 3)) * 5u + (CHAIN_LEN - 1);
    }
    tl_check(VARIANT, params, "%s", c.sum == want ? "ok" : "mismatch");
    return c.sum == want ? 0 : 1;
}
