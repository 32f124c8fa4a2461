/*
 * strlen-loop - strlen() in a loop condition is called on every iteration.
 *
 * From the method in shared/claims.md E10 (Gove, "The perils of strlen"):
 * `for (i = 0; i < strlen(s); i++)` over a 50-byte string. strlen is pure,
 * but the loop body stores through a char pointer that may point into s,
 * so the compiler cannot prove the length constant and calls strlen again
 * before every iteration (len + 1 calls per pass). Hoisting the length into
 * a variable leaves one call per pass.
 *
 * Variants (variant=): inloop, hoisted. Keys: len (string bytes, 50),
 * loops (passes over the string per sample). ops = loop iterations
 * (loops x len).
 *
 * Two binaries from this file (kernel.mk):
 *   strlen-loop    timing: one sample line per repetition
 *   strlen-count   the same code, linked with -Wl,--wrap=strlen, so every
 *                  strlen call the compiled loop makes lands in
 *                  __wrap_strlen, which counts it; prints kind=count lines
 *                  strlen_calls and iterations for one sample's worth of
 *                  passes (calls per iteration = their ratio).
 * strlen-count is compiled with -fno-builtin-strlen so that gcc treats every
 * strlen as an ordinary call it may not fold or expand. The loops compile to
 * the same instructions in both binaries (their stores through dst already
 * stop gcc from hoisting); disasm.yaml checks that the loop functions call
 * strlen in strlen-loop and __wrap_strlen in strlen-count.
 */
#include "trapline.h"

TL_ARGS({"variant", "inloop", "[choice] inloop|hoisted"},
        {"len", "50", "[int 1..1048576] string length in bytes"},
        {"loops", "2000000", "[int 1..1000000000000] passes over the string per sample (quick: 20000)"});

#ifdef STRLEN_COUNT
/* --wrap=strlen sends our object's strlen calls here; __real_strlen is the
 * C library's. Nothing else in the C library is redirected. */
size_t __real_strlen(const char *s);
size_t __wrap_strlen(const char *s);
static volatile uint64_t strlen_calls; /* volatile: glibc declares strlen pure,
                                         * so gcc may assume no call changes it */
__attribute__((noinline)) size_t __wrap_strlen(const char *s)
{
    strlen_calls++;
    return __real_strlen(s);
}
#endif

/* strlen in the condition; the store through dst (which could be s) forces
 * a new strlen before every test. */
__attribute__((noinline)) static size_t copy_inloop(char *dst, const char *s)
{
    size_t i;
    for (i = 0; i < strlen(s); i++)
        dst[i] = s[i] + 1;
    return i;
}

/* The same loop with the length computed once. */
__attribute__((noinline)) static size_t copy_hoisted(char *dst, const char *s)
{
    size_t i, n = strlen(s);
    for (i = 0; i < n; i++)
        dst[i] = s[i] + 1;
    return i;
}

struct ctx {
    char *dst;
    const char *s;
    uint64_t loops;
    int hoisted;
    uint64_t iterations;
};

static uint64_t body(void *vc)
{
    struct ctx *c = vc;
    uint64_t n = 0;
    for (uint64_t k = 0; k < c->loops; k++) {
        char *dst = c->dst;
        const char *s = c->s;
        TL_HIDE(dst);
        TL_HIDE(s);
        n += c->hoisted ? copy_hoisted(dst, s) : copy_inloop(dst, s);
    }
    c->iterations = n;
    return n;
}

int main(int argc, char **argv)
{
    struct tl_opts o = tl_start("strlen-loop", argc, argv, args);
    const char *variant = tl_choice(args, "variant", "inloop|hoisted");
    long len = tl_int(args, "len");
    long long loops = tl_quick_int(args, "loops", o.quick, 20000);
    if (len < 1 || len > 1 << 20 || loops < 1)
        tl_fail("need 1 <= len <= 1048576 and loops >= 1");

    char *s = tl_malloc(len + 1), *dst = tl_malloc(len + 1);
    for (long i = 0; i < len; i++)
        s[i] = 'a' + i % 26;
    s[len] = 0;
    dst[len] = 0;
    struct ctx c = {.dst = dst, .s = s, .loops = loops, .hoisted = !strcmp(variant, "hoisted")};
    char params[96];
    snprintf(params, sizeof params, "len=%ld loops=%lld", len, loops);
    tl_header("variant=%s len=%ld loops=%lld expected_calls_per_pass=%ld", variant, len, loops,
              c.hoisted ? 1L : len + 1);

#ifdef STRLEN_COUNT
    /* one untimed pass set: counting only */
    strlen_calls = 0;
    body(&c);
    uint64_t calls = strlen_calls;
    tl_count(variant, "strlen_calls", calls, params);
    tl_count(variant, "iterations", c.iterations, params);
    tl_count(variant, "passes", loops, params);
#else
    tl_measure(variant, params, o.warmup, o.reps, body, &c);
#endif
    /* dst[i] = s[i] + 1 for every i */
    int ok = c.iterations == (uint64_t)loops * len && dst[0] == 'b' && dst[len - 1] == s[len - 1] + 1;
    tl_check(variant, params, "%s", ok ? "ok" : "mismatch");
    return ok ? 0 : 1;
}
