/*
 * sparc-strong-prefetch - strong vs weak prefetch of an unmapped address.
 *
 * From the method in shared/claims.md E4 (Darryl Gove, "Strong prefetch"):
 * a loop of 1,000,000 prefetch instructions for address 0, "prefetch for
 * several writes", as a strong prefetch (SPARC function code 22) and as a
 * weak one (function code 2). A strong prefetch that misses the TLB takes
 * the TLB-miss trap; for an unmapped page the kernel then has to drop the
 * access, which shows as system time. A weak prefetch is dropped by the
 * hardware on a TLB miss.
 *
 * Variants (key variant=):
 *   strong  sparc64: prefetch [p], 22   x86_64: prefetchw   armv6: pld
 *   weak    sparc64: prefetch [p], 2    x86_64: prefetcht0  armv6: pld
 * Key fcn= (sparc64) picks another function code: 0-3 are the weak
 * several-reads/one-read/several-writes/one-write prefetches of SPARC V9,
 * 20-23 the strong versions of the same on UltraSPARC III/IV (fcn 5-15 are
 * reserved and trap as illegal instructions, so they are refused). fcn must
 * belong to the variant's class (0-3 weak, 20-23 strong).
 * Key target=null (default, the original's address 0) or mapped (a page of
 * ours that was touched first, for comparison).
 *
 * x86 prefetches never fault and never trap (PREFETCHh/PREFETCHW are hints;
 * an unmapped or non-canonical address is simply dropped), and ARMv6 PLD is
 * a hint too, so on x86_64 and armv6 both variants only measure the cost of
 * a dropped hint. The pointer is hidden (TL_HIDE) so gcc cannot see it is
 * NULL.
 */
#include "trapline.h"

TL_ARGS({"variant", "strong", "[choice] strong|weak (SPARC prefetch fcn 22 or 2)"},
        {"fcn", "auto", "[choice] auto|0|1|2|3|20|21|22|23 (sparc64 function code; auto: 22 strong, 2 weak)"},
        {"target", "null", "[choice] null|mapped (prefetch address 0, or a touched page of ours)"},
        {"iters", "1000000", "[int 1..2147483647] prefetches per sample (quick: 100000)"});

/* The measured loops, noinline and named for disasm.yaml; no_icf keeps the
 * identical-looking ones (armv6: pld in both) as separate symbols. */
#if defined(__sparc__)
#define PREFETCH_LOOP(name, fcn)                                                       \
    __attribute__((noinline, no_icf)) static uint64_t name(const char *p, unsigned long iters) \
    {                                                                                  \
        for (unsigned long i = 0; i < iters; i++)                                      \
            __asm__ volatile("prefetch [%0], " #fcn : : "r"(p));                       \
        return iters;                                                                  \
    }
PREFETCH_LOOP(prefetch_strong, 22)
PREFETCH_LOOP(prefetch_weak, 2)
/* target=null: the address is %g0 (always 0) in the instruction itself, so a
 * timing model that cannot read registers (QEMU 7.2's plugin API) still knows
 * the prefetch is of address 0, an unmapped page. */
#define PREFETCH_NULL_LOOP(name, fcn)                                                  \
    __attribute__((noinline, no_icf)) static uint64_t name(const char *p, unsigned long iters) \
    {                                                                                  \
        (void)p;                                                                       \
        for (unsigned long i = 0; i < iters; i++)                                      \
            __asm__ volatile("prefetch [%%g0], " #fcn ::: "memory");                   \
        return iters;                                                                  \
    }
PREFETCH_NULL_LOOP(prefetch_strong_null, 22)
PREFETCH_NULL_LOOP(prefetch_weak_null, 2)
PREFETCH_LOOP(prefetch_fcn0, 0)
PREFETCH_LOOP(prefetch_fcn1, 1)
PREFETCH_LOOP(prefetch_fcn3, 3)
PREFETCH_LOOP(prefetch_fcn20, 20)
PREFETCH_LOOP(prefetch_fcn21, 21)
PREFETCH_LOOP(prefetch_fcn23, 23)
#else
#if defined(__x86_64__)
#define STRONG_INSN "prefetchw (%0)"
#define WEAK_INSN "prefetcht0 (%0)"
#elif defined(__arm__)
#define STRONG_INSN "pld [%0]"
#define WEAK_INSN "pld [%0]"
#else
#error "no prefetch instruction for this architecture"
#endif
__attribute__((noinline, no_icf)) static uint64_t prefetch_strong(const char *p, unsigned long iters)
{
    for (unsigned long i = 0; i < iters; i++)
        __asm__ volatile(STRONG_INSN : : "r"(p));
    return iters;
}

__attribute__((noinline, no_icf)) static uint64_t prefetch_weak(const char *p, unsigned long iters)
{
    for (unsigned long i = 0; i < iters; i++)
        __asm__ volatile(WEAK_INSN : : "r"(p));
    return iters;
}
#endif

typedef uint64_t (*loop_fn)(const char *, unsigned long);

struct ctx {
    loop_fn fn;
    const char *p;
    unsigned long iters;
};

static uint64_t body(void *vc)
{
    struct ctx *c = vc;
    return c->fn(c->p, c->iters);
}

int main(int argc, char **argv)
{
    /* The preamble stays written out (not tl_start): see trapline.h, the model lanes. */
    tl_exp = "sparc-strong-prefetch";
    tl_parse_args(argc, argv, args);
    const char *variant = tl_choice(args, "variant", "strong|weak");
    const char *fcn_s = tl_choice(args, "fcn", "auto|0|1|2|3|20|21|22|23");
    const char *target = tl_choice(args, "target", "null|mapped");
    int quick = tl_int(args, "quick");
    int reps = tl_int(args, "reps"), warmup = tl_int(args, "warmup");
    long long iters = tl_int(args, "iters");
    if (quick && !tl_given(args, "iters"))
        iters = 100000;
    if (iters <= 0 || iters > 0x7fffffffLL) {
        fprintf(stderr, "%s: iters must be 1..2147483647\n", tl_exp);
        return 2;
    }
    int strong = !strcmp(variant, "strong");
    int fcn = !strcmp(fcn_s, "auto") ? (strong ? 22 : 2) : atoi(fcn_s);
    if ((fcn >= 20) != strong) {
        fprintf(stderr, "%s: fcn=%d is a %s prefetch; it does not fit variant=%s\n", tl_exp, fcn,
                fcn >= 20 ? "strong" : "weak", variant);
        return 2;
    }

    loop_fn fn = strong ? prefetch_strong : prefetch_weak;
#if defined(__sparc__)
    switch (fcn) {
    case 0: fn = prefetch_fcn0; break;
    case 1: fn = prefetch_fcn1; break;
    case 3: fn = prefetch_fcn3; break;
    case 20: fn = prefetch_fcn20; break;
    case 21: fn = prefetch_fcn21; break;
    case 23: fn = prefetch_fcn23; break;
    default: /* 2 and 22: prefetch_weak / prefetch_strong, address 0 as %g0 for target=null */
        if (!strcmp(target, "null"))
            fn = strong ? prefetch_strong_null : prefetch_weak_null;
        break;
    }
    const char *insn = "prefetch";
#elif defined(__x86_64__)
    const char *insn = strong ? "prefetchw" : "prefetcht0";
#else
    const char *insn = "pld";
#endif

    static char page[8192] __attribute__((aligned(8192)));
    const char *p = NULL;
    if (!strcmp(target, "mapped")) {
        memset(page, 1, sizeof page);
        p = page;
    }
    TL_HIDE(p);

    tl_timer_check();
    printf("TL exp=%s kind=info arch=%s variant=%s fcn=%d insn=%s target=%s addr=%#lx iters=%lld\n", tl_exp, TL_ARCH,
           variant, fcn, insn, target, (unsigned long)(uintptr_t)p, iters);

    struct ctx c = {.fn = fn, .p = p, .iters = (unsigned long)iters};
    char params[128];
    snprintf(params, sizeof params, "fcn=%d target=%s iters=%lld", fcn, target, iters);
    tl_measure_rusage(variant, params, warmup, reps, body, &c);
    /* every run (warm-up included) executed iters prefetches without a fault */
    tl_count(variant, "prefetches", (uint64_t)iters * (uint64_t)(warmup + reps), params);
    return 0;
}
