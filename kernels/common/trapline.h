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
#include <stdarg.h>
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
#if defined(TL_GEM5) && defined(__x86_64__)
/* gem5 build (-DTL_GEM5): each marker is an m5 op (gem5's util/m5/src/abi/x86/m5op.S: 0f 04 and
 * the function, arguments in rdi and rsi): reset the stats at a region's start, dump them at its end. */
#define TL_M5OP_X86(func) __asm__ volatile("xor %%edi, %%edi\n\txor %%esi, %%esi\n\t.byte 0x0f, 0x04\n\t.word " #func ::: "rax", "rdi", "rsi", "memory")
#define TL_ROI_BEGIN() TL_M5OP_X86(0x40)
#define TL_ROI_END() TL_M5OP_X86(0x41)
#elif defined(TL_GEM5) && defined(__sparc__)
/* gem5 build: gem5's util/m5/src/abi/sparc/m5op.S: op 2, op3 0x37 (IMPDEP2), the function in bits 7..15; arguments in o0, o1. */
#define TL_M5OP_SPARC(func) __asm__ volatile("mov %%g0, %%o0\n\tmov %%g0, %%o1\n\t.word (2 << 30) | (0x37 << 19) | (" #func " << 7)" ::: "o0", "o1", "memory")
#define TL_ROI_BEGIN() TL_M5OP_SPARC(0x40)
#define TL_ROI_END() TL_M5OP_SPARC(0x41)
#elif defined(__x86_64__)
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
 * reps, warmup and quick must be declared by every kernel (TL_ARGS adds them). */
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
#define TL_COMMON_ARGS                                                                          \
    {"reps", "5", "[int 1..1000000] measured repetitions (each printed as one sample)"},        \
    {"warmup", "1", "[int 0..1000000] unmeasured repetitions run first"},                       \
    {"quick", "0", "[int 0..1] 1 = small default sizes for tests"}

/* The one form of a kernel's argument table: its own keys, one
 * {key, default, help} per key, then the common keys and the terminator.
 * Every help starts with the key's type and range, which --help shows and the
 * harness reads from this source before any run (trapline/kernelargs.py):
 * [int LO..HI], [float LO..HI], [range LO..HI] (N or LO-HI, LO <= HI),
 * [list LO..HI] (comma-separated integers, or empty), [choice] (the a|b|c
 * lists in the help). Declares `args`:
 *   TL_ARGS({"variant", "row", "[choice] row|column"},
 *           {"rows", "4096", "[int 1..1048576] rows of the array (quick: 2048)"});
 * A size that quick=1 scales down says so in its help, "(quick: N)", and is
 * read with tl_quick_int(args, key, o.quick, N). */
#define TL_ARGS(...) static struct tl_arg args[] = {__VA_ARGS__, TL_COMMON_ARGS, {0, 0, 0}}

/* What every kernel reads before its own keys. */
struct tl_opts {
    int quick;  /* quick=1: small default sizes */
    int reps;   /* measured repetitions */
    int warmup; /* unmeasured repetitions first */
};

/* The one main() preamble: name the experiment (for every TL line and
 * message), parse argv into args (exit 2 on a bad key) and read the common
 * keys. Then a kernel reads its own keys (tl_choice, tl_int, tl_quick_int),
 * rejects bad values with tl_fail and prints tl_header.
 *
 * The four kernels of the deterministic model lanes (loop-order,
 * x86-split-lock, sparc-spill-fill, sparc-strong-prefetch) keep the
 * preamble written out: tl_measure is inlined into main(), so any change to
 * main() moves the registers, stack slots and cache lines of the code around
 * the region markers, and the model's per-region counts with them (tried:
 * loop-order's figure moved from 7.328139 to 7.328681). Their binaries are
 * kept byte-identical instead. */
static inline struct tl_opts tl_start(const char *exp, int argc, char **argv, struct tl_arg *args)
{
    tl_exp = exp;
    tl_parse_args(argc, argv, args);
    struct tl_opts o = {.quick = tl_int(args, "quick")};
    o.reps = tl_int(args, "reps"), o.warmup = tl_int(args, "warmup");
    return o;
}

/* A size key: its value, or quick_value when quick=1 and the command line
 * did not name the key (an explicit value, even the default, always wins). */
static inline long long tl_quick_int(const struct tl_arg *args, const char *key, int quick, long long quick_value)
{
    long long v = tl_int(args, key);
    return quick && !tl_given(args, key) ? quick_value : v;
}

/* Bad input: one line naming the field and what is valid, exit status 2. */
static inline void tl_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* One kind=info line: "TL exp=<id> kind=info " and the formatted facts. */
static inline void tl_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The opening lines every kernel prints once its keys are valid: the timer
 * facts (kind=timer) and a kind=info line that starts with arch=<arch>. */
static inline void tl_header(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---------------------------------------------------------- measurement */

/* Run fn(ctx) warmup times unmeasured, then reps times measured; print one
 * sample line per measured repetition. Each measured repetition is one region
 * of interest for the timing model (TL_ROI_BEGIN/END): the model's region i is
 * the kernel's sample line i. fn returns the number of operations
 * it performed (the harness divides ns by ops). params is a preformatted
 * string of extra key=value pairs ("offset=57 width=8"), or "". */
typedef uint64_t (*tl_body_fn)(void *ctx);

/* The one measuring loop behind tl_measure, tl_measure_rusage and
 * tl_measure_setup. always_inline with constant setup and rusage, so each
 * wrapper compiles to the code of its own loop (the model-lane binaries are
 * byte-identical to those built from the three separate loops it replaced). */
static inline __attribute__((always_inline)) void tl_measure_loop(const char *variant, const char *params, int warmup,
                                                                 int reps, void (*setup)(void *ctx), tl_body_fn fn,
                                                                 void *ctx, int rusage)
{
    for (int i = 0; i < warmup; i++) {
        if (setup)
            setup(ctx);
        fn(ctx);
    }
    for (int r = 0; r < reps; r++) {
        uint64_t u0, s0, u1, s1;
        if (setup)
            setup(ctx);
        if (rusage)
            tl_rusage_ns(&u0, &s0);
        uint64_t t0 = tl_now_ns();
        TL_ROI_BEGIN();
        uint64_t ops = fn(ctx);
        TL_ROI_END();
        uint64_t t1 = tl_now_ns();
        if (rusage) {
            tl_rusage_ns(&u1, &s1);
            printf("TL exp=%s kind=sample variant=%s rep=%d ops=%" PRIu64 " ns=%" PRIu64 " user_ns=%" PRIu64
                   " sys_ns=%" PRIu64 "%s%s\n",
                   tl_exp, variant, r, ops, t1 - t0, u1 - u0, s1 - s0, params && *params ? " " : "",
                   params ? params : "");
        } else {
            printf("TL exp=%s kind=sample variant=%s rep=%d ops=%" PRIu64 " ns=%" PRIu64 "%s%s\n", tl_exp, variant,
                   r, ops, t1 - t0, params && *params ? " " : "", params ? params : "");
        }
        fflush(stdout);
    }
}

static inline void tl_measure(const char *variant, const char *params, int warmup, int reps, tl_body_fn fn,
                              void *ctx)
{
    tl_measure_loop(variant, params, warmup, reps, NULL, fn, ctx, 0);
}

/* Same, but also records user and system CPU time of each repetition, for
 * kernels whose claim splits real/user/sys (trap handling shows as sys). */
static inline void tl_measure_rusage(const char *variant, const char *params, int warmup, int reps,
                                     tl_body_fn fn, void *ctx)
{
    tl_measure_loop(variant, params, warmup, reps, NULL, fn, ctx, 1);
}

/* Same as tl_measure, but setup(ctx) runs untimed before every run (warm-up
 * runs included): for kernels whose runs leave state behind that must be torn
 * down or rebuilt before the next one (an allocator's heap, for example). */
static inline void tl_measure_setup(const char *variant, const char *params, int warmup, int reps,
                                    void (*setup)(void *ctx), tl_body_fn fn, void *ctx)
{
    tl_measure_loop(variant, params, warmup, reps, setup, fn, ctx, 0);
}

static inline void tl_check(const char *variant, const char *params, const char *fmt_value, ...)
    __attribute__((format(printf, 3, 4)));
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

static inline void tl_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", tl_exp);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}

static inline void tl_info(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("TL exp=%s kind=info ", tl_exp);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

static inline void tl_header(const char *fmt, ...)
{
    tl_timer_check();
    va_list ap;
    va_start(ap, fmt);
    printf("TL exp=%s kind=info arch=%s ", tl_exp, TL_ARCH);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
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

/* malloc, or exit 1 saying "out of memory". */
static inline void *tl_malloc(size_t size)
{
    void *p = malloc(size);
    if (!p) {
        fprintf(stderr, "%s: out of memory\n", tl_exp);
        exit(1);
    }
    return p;
}

#endif /* TRAPLINE_H */
