/*
 * sparc-spill-fill - the peak rate of register-window spill and fill traps.
 *
 * From the method in shared/claims.md E8 (Darryl Gove, "Peak rate of window
 * spill and fill traps"): two routines in two libraries call each other
 * recursively to depth N (N up to 10,000), many times, so that nearly every
 * call overflows the register windows (a spill trap on the way down) and
 * nearly every return underflows them (a fill trap on the way up). The
 * traps are fast traps handled without entering the kernel proper, so the
 * cost shows as user time, not system time.
 *
 * Here the two routines are spill_a (lib_a.c) and spill_b (lib_b.c), linked
 * into the one static binary but compiled as separate units (spill_fill.h).
 * One sample = `repeats` descents of depth N; ops = calls = N x repeats.
 * Keys: depth (default 10000) or depths=a,b,c to sweep, repeats.
 *
 * Window-trap counts are not measured here (trapstat is Solaris-only; on
 * Linux nothing counts them for user space). What we print is derived:
 *
 *   SPARC V9 keeps CANSAVE + CANRESTORE + OTHERWIN = NWINDOWS - 2 (SPARC V9
 *   Architecture Manual, 5.2.10, "Register-Window State Registers"; one
 *   window is always left for the trap handler and one is the overlap with
 *   the current window's outs). In steady state each descent starts right
 *   after the previous ascent, which filled windows one at a time, so
 *   CANRESTORE is 0 and NWINDOWS - 2 saves are free: a descent of depth N
 *   spills N - (NWINDOWS - 2) windows, and the ascent fills the same number
 *   back (Linux's spill and fill handlers move one window per trap).
 *   UltraSPARC I-IV and T1/T2 have NWINDOWS = 8, so about N - 6 spills and
 *   N - 6 fills per descent; interrupts and context switches that flush
 *   the windows add a few. Other architectures have no register windows:
 *   0 expected.
 *
 * These appear as kind=count name=expected_spills / expected_fills with
 * source=derived (per descent, and the total per sample).
 */
#include "trapline.h"
#include "spill_fill.h"

TL_ARGS({"depth", "10000", "[int 1..20000] recursion depth N = nested calls per descent (quick: 1000)"},
        {"depths", "", "[list 1..20000] comma-separated depths to sweep (overrides depth), e.g. 10,100,1000,10000"},
        {"repeats", "100", "[int 1..1000000000] descents per sample (quick: 10)"},
        {"nwindows", "8", "[int 3..32] register windows assumed for the derived trap counts (sparc64)"});

#define MAX_DEPTH 20000 /* 20000 x 176-byte sparc64 frames = 3.4 MiB of stack */
#define MAX_DEPTHS 64

struct ctx {
    long depth, repeats;
    long last;
};

/* The measured loop: descents from a shallow stack, each result used. */
__attribute__((noinline)) static uint64_t descend(struct ctx *c)
{
    long sum = 0;
    for (long r = 0; r < c->repeats; r++) {
        long d = c->depth;
        TL_HIDE(d);
        sum += spill_a(d);
    }
    c->last = sum;
    return (uint64_t)c->depth * (uint64_t)c->repeats;
}

static uint64_t body(void *vc)
{
    return descend(vc);
}

int main(int argc, char **argv)
{
    /* The preamble stays written out (not tl_start): see trapline.h, the model lanes. */
    tl_exp = "sparc-spill-fill";
    tl_parse_args(argc, argv, args);
    int quick = tl_int(args, "quick");
    int reps = tl_int(args, "reps"), warmup = tl_int(args, "warmup");
    long repeats = tl_int(args, "repeats");
    if (quick && !tl_given(args, "repeats"))
        repeats = 10;
    long nwin = tl_int(args, "nwindows");

    long depths[MAX_DEPTHS];
    int ndepths = 0;
    const char *ds = tl_str(args, "depths");
    if (*ds) {
        const char *s = ds;
        while (*s) {
            char *end;
            long v = strtol(s, &end, 0);
            if (end == s || (*end && *end != ',') || ndepths == MAX_DEPTHS) {
                fprintf(stderr, "%s: depths=%s is not a list of at most %d integers\n", tl_exp, ds, MAX_DEPTHS);
                return 2;
            }
            depths[ndepths++] = v;
            s = *end ? end + 1 : end;
        }
    } else {
        depths[ndepths++] = tl_int(args, "depth");
        if (quick && !tl_given(args, "depth"))
            depths[0] = 1000;
    }
    for (int i = 0; i < ndepths; i++)
        if (depths[i] < 1 || depths[i] > MAX_DEPTH) {
            fprintf(stderr, "%s: depth %ld out of range 1..%d\n", tl_exp, depths[i], MAX_DEPTH);
            return 2;
        }
    if (repeats < 1 || nwin < 3) {
        fprintf(stderr, "%s: need repeats >= 1 and nwindows >= 3\n", tl_exp);
        return 2;
    }
#if defined(__sparc__)
    long usable = nwin - 2;
#else
    nwin = 0; /* no register windows */
    long usable = 0;
#endif

    tl_timer_check();
    printf("TL exp=%s kind=info arch=%s nwindows=%ld usable_windows=%ld repeats=%ld ndepths=%d\n", tl_exp, TL_ARCH,
           nwin, usable, repeats, ndepths);

    for (int i = 0; i < ndepths; i++) {
        long n = depths[i];
        struct ctx c = {.depth = n, .repeats = repeats};
        char params[160];
        snprintf(params, sizeof params, "depth=%ld repeats=%ld", n, repeats);

        uint64_t per = (nwin && n > usable) ? (uint64_t)(n - usable) : 0;
        char cp[256];
        snprintf(cp, sizeof cp, "%s nwindows=%ld source=derived per=descent", params, nwin);
        tl_count("recursion", "expected_spills", per, cp);
        tl_count("recursion", "expected_fills", per, cp);
        tl_count("recursion", "calls_per_descent", (uint64_t)n, cp);
        snprintf(cp, sizeof cp, "%s nwindows=%ld source=derived per=sample", params, nwin);
        tl_count("recursion", "expected_spills", per * (uint64_t)repeats, cp);
        tl_count("recursion", "expected_fills", per * (uint64_t)repeats, cp);

        tl_measure_rusage("recursion", params, warmup, reps, body, &c);
        if (reps + warmup == 0)
            body(&c);
        tl_check("recursion", params, "%ld", c.last);
        if (c.last != n * repeats) {
            fprintf(stderr, "%s: descents returned %ld, expected %ld\n", tl_exp, c.last, n * repeats);
            return 1;
        }
    }
    return 0;
}
