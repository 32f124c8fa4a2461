/*
 * trapline.h - the one header every trapline kernel includes.
 *
 * It gives a kernel three things:
 *   1. arguments as key=value pairs (QEMU contrib/plugins style): every kernel
 *      declares its keys with their defaults; an unknown key or a malformed
 *      value exits with status 2 and names the valid keys.
 *   2. a monotonic nanosecond clock, a timer-resolution check, and a
 *      warm-up + repetitions discipline (tl_measure).
 *   3. one machine-readable output line format, parsed by the harness
 *      (trapline/kernelio.py):
 *
 *        TL exp=<id> kind=<kind> key=value key=value ...
 *
 *      kind=timer   res_ns=<clock_getres> min_delta_ns=<smallest step seen>
 *      kind=sample  variant=<v> rep=<i> ops=<n> ns=<elapsed> [params...]
 *      kind=check   variant=<v> value=<what the kernel computed> [params...]
 *      kind=count   variant=<v> name=<counter> value=<n> [params...]
 *      kind=info    free-form key=value facts (sizes, addresses, arch)
 *      kind=skip    variant=<v> reason=<word_with_underscores>
 *
 *      Values never contain spaces. Warm-up runs are not printed. Anything
 *      that does not start with "TL " is ignored by the harness, so a kernel
 *      may print human-readable text too (to stderr, preferably).
 *
 * Kernels are built static for x86_64, sparc64 and armv6 with Debian's GNU
 * toolchains (see kernels/Makefile); nothing here is architecture specific
 * except tl_compiler_barrier.
 */
#ifndef TRAPLINE_H
#define TRAPLINE_H

#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#define TL_ARCH "x86_64"
#elif defined(__sparc__) && defined(__arch64__)
#define TL_ARCH "sparc64"
#elif defined(__arm__)
#define TL_ARCH "armv6"
#else
#define TL_ARCH "unknown"
#endif

/* Hide a value from the optimiser: after this the compiler knows nothing
 * about p (its alignment included), so a misaligned pointer is loaded with
 * the instruction the source asks for instead of being rewritten into byte
 * loads. */
#define TL_HIDE(p) __asm__ volatile("" : "+r"(p))
#define tl_compiler_barrier() __asm__ volatile("" ::: "memory")

/* Keep a computed value alive without storing it anywhere observable. */
#define TL_USE(v) __asm__ volatile("" : : "r"(v) : "memory")

/* Region of interest for the timing model (model/plugin/trapline-model.c,
 * docs/model.md): only what runs between TL_ROI_BEGIN() and TL_ROI_END() is
 * charged, one region per pair; a program without markers is one region.
 * Each marker is one harmless instruction that compilers never emit, a
 * no-op everywhere else (natively, under plain QEMU, on real hardware):
 *   x86_64   nopl 0x544c0001(%rax) / nopl 0x544c0002(%rax)   (0f 1f 80 disp32)
 *   sparc64  sethi 0x544c1, %g0 / sethi 0x544c2, %g0           (0x010544c1 / 0x010544c2)
 *   armv6    orr r11, r11, r11 / orr r12, r12, r12             (0xe18bb00b / 0xe18cc00c)
 * The memory clobber keeps the compiler from moving loads and stores across. */
#if defined(__x86_64__)
#define TL_ROI_BEGIN() __asm__ volatile("nopl 0x544c0001(%%rax)" ::: "memory")
#define TL_ROI_END() __asm__ volatile("nopl 0x544c0002(%%rax)" ::: "memory")
#elif defined(__sparc__)
#define TL_ROI_BEGIN() __asm__ volatile(".word 0x010544c1 ! sethi 0x544c1, %%g0" ::: "memory")
#define TL_ROI_END() __asm__ volatile(".word 0x010544c2 ! sethi 0x544c2, %%g0" ::: "memory")
#elif defined(__arm__)
#define TL_ROI_BEGIN() __asm__ volatile("orr r11, r11, r11" ::: "memory")
#define TL_ROI_END() __asm__ volatile("orr r12, r12, r12" ::: "memory")
#else
#define TL_ROI_BEGIN() tl_compiler_barrier()
#define TL_ROI_END() tl_compiler_barrier()
#endif

/* ---------------------------------------------------------------- clock */

static inline uint64_t tl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wall clock of this process's own CPU time (user + sys), for kernels that
 * want to split the time like ptime/time did in the original posts. */
#include <sys/resource.h>
static inline void tl_rusage_ns(uint64_t *user_ns, uint64_t *sys_ns)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *user_ns = (uint64_t)ru.ru_utime.tv_sec * 1000000000ull + (uint64_t)ru.ru_utime.tv_usec * 1000ull;
    *sys_ns = (uint64_t)ru.ru_stime.tv_sec * 1000000000ull + (uint64_t)ru.ru_stime.tv_usec * 1000ull;
}

static const char *tl_exp = "unknown";

/* Print the timer facts the harness needs to judge whether a sample is long
 * enough: the clock's advertised resolution and the smallest non-zero step
 * between two successive reads (which includes the cost of a read). */
static inline void tl_timer_check(void)
{
    struct timespec res;
    clock_getres(CLOCK_MONOTONIC, &res);
    uint64_t min_delta = UINT64_MAX;
    for (int i = 0; i < 1000; i++) {
        uint64_t a = tl_now_ns(), b;
        do {
            b = tl_now_ns();
        } while (b == a);
        if (b - a < min_delta)
            min_delta = b - a;
    }
    printf("TL exp=%s kind=timer res_ns=%" PRIu64 " min_delta_ns=%" PRIu64 " arch=%s\n", tl_exp,
           (uint64_t)(res.tv_sec * 1000000000ull + res.tv_nsec), min_delta, TL_ARCH);
}

/* ------------------------------------------------------------ arguments */

struct tl_arg {
    const char *key;   /* "offset" */
    const char *value; /* default, as text; replaced by the command line */
    const char *help;  /* one line: what it is and its unit */
    int given;         /* set by tl_parse_args when the command line names it */
};

static inline void tl_usage(const struct tl_arg *args, FILE *out)
{
    fprintf(out, "usage: %s key=value ...\nkeys:\n", tl_exp);
    for (const struct tl_arg *a = args; a->key; a++)
        fprintf(out, "  %-12s default %-10s %s\n", a->key, a->value, a->help);
}

/* Parse argv into the table; exits 2 on anything unknown. The common keys
 * reps, warmup and quick must be declared by every kernel (TL_COMMON_ARGS). */
static inline void tl_parse_args(int argc, char **argv, struct tl_arg *args)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            tl_usage(args, stdout);
            exit(0);
        }
        char *eq = strchr(argv[i], '=');
        if (!eq) {
            fprintf(stderr, "%s: argument '%s' is not key=value\n", tl_exp, argv[i]);
            tl_usage(args, stderr);
            exit(2);
        }
        struct tl_arg *a;
        for (a = args; a->key; a++)
            if (strlen(a->key) == (size_t)(eq - argv[i]) && !strncmp(a->key, argv[i], eq - argv[i]))
                break;
        if (!a->key) {
            fprintf(stderr, "%s: unknown key '%.*s'; valid keys:", tl_exp, (int)(eq - argv[i]), argv[i]);
            for (a = args; a->key; a++)
                fprintf(stderr, " %s", a->key);
            fprintf(stderr, "\n");
            exit(2);
        }
        a->value = eq + 1;
        a->given = 1;
    }
}

static inline const char *tl_str(const struct tl_arg *args, const char *key)
{
    for (const struct tl_arg *a = args; a->key; a++)
        if (!strcmp(a->key, key))
            return a->value;
    fprintf(stderr, "%s: internal error: key '%s' not declared\n", tl_exp, key);
    exit(3);
}

/* True when the command line set key; quick mode scales only the defaults,
 * so an explicit value (even one equal to the default) always wins. */
static inline int tl_given(const struct tl_arg *args, const char *key)
{
    for (const struct tl_arg *a = args; a->key; a++)
        if (!strcmp(a->key, key))
            return a->given;
    fprintf(stderr, "%s: internal error: key '%s' not declared\n", tl_exp, key);
    exit(3);
}

static inline long long tl_int(const struct tl_arg *args, const char *key)
{
    const char *s = tl_str(args, key);
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno || end == s || *end) {
        fprintf(stderr, "%s: %s=%s is not an integer\n", tl_exp, key, s);
        exit(2);
    }
    return v;
}

/* Fail with status 2 unless value is one of the '|'-separated choices. */
static inline const char *tl_choice(const struct tl_arg *args, const char *key, const char *choices)
{
    const char *v = tl_str(args, key);
    size_t n = strlen(v);
    const char *c = choices;
    while (*c) {
        const char *bar = strchr(c, '|');
        size_t len = bar ? (size_t)(bar - c) : strlen(c);
        if (len == n && !strncmp(c, v, n))
            return v;
        c += len + (bar ? 1 : 0);
    }
    fprintf(stderr, "%s: %s=%s is not valid; choose one of: %s\n", tl_exp, key, v, choices);
    exit(2);
}

/* Every kernel declares these three keys. quick=1 asks the kernel to scale
 * its default sizes down for tests (explicit sizes still win). */
#define TL_COMMON_ARGS                                                       \
    {"reps", "5", "measured repetitions (each printed as one sample)"},     \
    {"warmup", "1", "unmeasured repetitions run first"},                     \
    {"quick", "0", "1 = small default sizes for tests"}

/* ---------------------------------------------------------- measurement */

/* Run fn(ctx) warmup times unmeasured, then reps times measured; print one
 * sample line per measured repetition. Each measured repetition is one region
 * of interest for the timing model (TL_ROI_BEGIN/END): the model's region i is
 * the kernel's sample line i. fn returns the number of operations
 * it performed (the harness divides ns by ops). params is a preformatted
 * string of extra key=value pairs ("offset=57 width=8"), or "". */
typedef uint64_t (*tl_body_fn)(void *ctx);

static inline void tl_measure(const char *variant, const char *params, int warmup, int reps,
                              tl_body_fn fn, void *ctx)
{
    for (int i = 0; i < warmup; i++)
        fn(ctx);
    for (int r = 0; r < reps; r++) {
        uint64_t t0 = tl_now_ns();
        TL_ROI_BEGIN();
        uint64_t ops = fn(ctx);
        TL_ROI_END();
        uint64_t t1 = tl_now_ns();
        printf("TL exp=%s kind=sample variant=%s rep=%d ops=%" PRIu64 " ns=%" PRIu64 "%s%s\n", tl_exp,
               variant, r, ops, t1 - t0, params && *params ? " " : "", params ? params : "");
        fflush(stdout);
    }
}

/* Same, but also records user and system CPU time of each repetition, for
 * kernels whose claim splits real/user/sys (trap handling shows as sys). */
static inline void tl_measure_rusage(const char *variant, const char *params, int warmup, int reps,
                                     tl_body_fn fn, void *ctx)
{
    for (int i = 0; i < warmup; i++)
        fn(ctx);
    for (int r = 0; r < reps; r++) {
        uint64_t u0, s0, u1, s1;
        tl_rusage_ns(&u0, &s0);
        uint64_t t0 = tl_now_ns();
        TL_ROI_BEGIN();
        uint64_t ops = fn(ctx);
        TL_ROI_END();
        uint64_t t1 = tl_now_ns();
        tl_rusage_ns(&u1, &s1);
        printf("TL exp=%s kind=sample variant=%s rep=%d ops=%" PRIu64 " ns=%" PRIu64 " user_ns=%" PRIu64
               " sys_ns=%" PRIu64 "%s%s\n",
               tl_exp, variant, r, ops, t1 - t0, u1 - u0, s1 - s0, params && *params ? " " : "",
               params ? params : "");
        fflush(stdout);
    }
}

/* Same as tl_measure, but setup(ctx) runs untimed before every run (warm-up
 * runs included): for kernels whose runs leave state behind that must be torn
 * down or rebuilt before the next one (an allocator's heap, for example). */
static inline void tl_measure_setup(const char *variant, const char *params, int warmup, int reps,
                                    void (*setup)(void *ctx), tl_body_fn fn, void *ctx)
{
    for (int i = 0; i < warmup; i++) {
        setup(ctx);
        fn(ctx);
    }
    for (int r = 0; r < reps; r++) {
        setup(ctx);
        uint64_t t0 = tl_now_ns();
        TL_ROI_BEGIN();
        uint64_t ops = fn(ctx);
        TL_ROI_END();
        uint64_t t1 = tl_now_ns();
        printf("TL exp=%s kind=sample variant=%s rep=%d ops=%" PRIu64 " ns=%" PRIu64 "%s%s\n", tl_exp,
               variant, r, ops, t1 - t0, params && *params ? " " : "", params ? params : "");
        fflush(stdout);
    }
}

static inline void tl_check(const char *variant, const char *params, const char *fmt_value, ...)
    __attribute__((format(printf, 3, 4)));
#include <stdarg.h>
static inline void tl_check(const char *variant, const char *params, const char *fmt_value, ...)
{
    char buf[128];
    va_list ap;
    va_start(ap, fmt_value);
    vsnprintf(buf, sizeof buf, fmt_value, ap);
    va_end(ap);
    printf("TL exp=%s kind=check variant=%s value=%s%s%s\n", tl_exp, variant, buf,
           params && *params ? " " : "", params ? params : "");
    fflush(stdout);
}

static inline void tl_count(const char *variant, const char *name, uint64_t value, const char *params)
{
    printf("TL exp=%s kind=count variant=%s name=%s value=%" PRIu64 "%s%s\n", tl_exp, variant, name,
           value, params && *params ? " " : "", params ? params : "");
    fflush(stdout);
}

static inline void tl_skip(const char *variant, const char *reason)
{
    printf("TL exp=%s kind=skip variant=%s reason=%s\n", tl_exp, variant, reason);
    fflush(stdout);
}

/* Allocate size bytes aligned to align (a power of two), zeroed. */
static inline void *tl_aligned_alloc(size_t align, size_t size)
{
    void *p = NULL;
    if (posix_memalign(&p, align, size)) {
        fprintf(stderr, "%s: out of memory (%zu bytes)\n", tl_exp, size);
        exit(1);
    }
    memset(p, 0, size);
    return p;
}

#endif /* TRAPLINE_H */
