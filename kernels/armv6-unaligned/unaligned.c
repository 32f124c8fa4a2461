/*
 * armv6-unaligned - unaligned 32- and 64-bit loads on the ARM1176
 * (Raspberry Pi 1): done by the hardware, by the kernel's alignment-fault
 * fixup, or by gcc as byte loads.
 *
 * From the method in shared/claims.md E2 ("Performance of Unaligned Memory
 * Access in Raspberry Pi"): a 16-byte buffer filled with 0..15; a loop of
 * 100,000,000 iterations loads a 4-byte (or 8-byte) value from &buf[1]
 * (unaligned) or &buf[0] (aligned) and keeps the last value, printed at the
 * end (0x4030201 for the unaligned 32-bit load on a little-endian machine).
 *
 * Variants (key variant=, per width=):
 *   width=32  aligned         LDR from &buf[0]
 *             unaligned-hw    LDR from &buf[1]: ARMv6 with SCTLR.U=1 (Linux
 *                             sets it) does this in hardware
 *             packed          a packed struct from &buf[1]: gcc emits four
 *                             LDRB and assembles the word ("software fixup")
 *   width=64  aligned         LDRD from &buf[0]
 *             unaligned-ldrd  LDRD from &buf[1]: alignment fault, fixed up
 *                             by the kernel (arch/arm/mm/alignment.c)
 *             unaligned-ldm   LDM {r2,r3} from &buf[1]: the same, via LDM
 *             packed          a packed struct from &buf[1]: eight LDRB
 * On armv6 the LDR/LDRD/LDM variants are inline asm, so the instruction is
 * exactly the one named. On x86_64 and sparc64 they are plain C loads
 * through a pointer gcc cannot see (mov; lduw/ldx): x86 handles every case
 * in hardware, sparc64 raises SIGBUS for the unaligned ones.
 *
 * A SIGBUS (no fixup: sparc64, or qemu-arm user mode, which does not emulate
 * the kernel's fixup) prints kind=skip reason=sigbus_no_alignment_fixup and
 * exits 0. Where /proc/cpu/alignment exists (ARM Linux), the kernel's fixup
 * counters (User, DWord, Multi) are read before and after the measured
 * repetitions and the differences printed as kind=count.
 */
#include "trapline.h"
#include <limits.h>
#include <signal.h>
#include <unistd.h>

TL_ARGS({"width", "32", "[choice] 32|64 (bits per load)"},
        {"variant", "aligned", "[choice] width=32: aligned|unaligned-hw|packed; width=64: aligned|unaligned-ldrd|unaligned-ldm|packed"},
        {"iters", "100000000", "[int 1..4294967295] loads per sample (quick: 100000, 2000 for unaligned-ldrd/ldm)"});

struct p32 {
    uint32_t v;
} __attribute__((packed));

struct p64 {
    uint64_t v;
} __attribute__((packed));

/* The loops, one per variant, noinline and named for disasm.yaml. The loop
 * counter is an unsigned long (32 bits on ARM, like the original's int).
 * Each iteration performs one load (LOAD, a statement that sets v from p);
 * only the last value is returned. no_icf: several loops are identical code
 * (they differ only in the pointer they are given) and must stay separate
 * symbols. */
#define LOAD_LOOP(name, type, LOAD)                                                                  \
    __attribute__((noinline, no_icf)) static type name(const unsigned char *p, unsigned long iters) \
    {                                                                                                \
        type v = 0;                                                                                  \
        for (unsigned long i = 0; i < iters; i++) {                                                  \
            LOAD;                                                                                    \
        }                                                                                            \
        return v;                                                                                    \
    }
#if defined(__arm__)
/* exactly the instruction named */
#define ASM_LOAD(insn) __asm__ volatile(insn : "=r"(v) : "r"(p) : "memory")
LOAD_LOOP(load32_aligned, uint32_t, ASM_LOAD("ldr %0, [%1]"))
LOAD_LOOP(load32_unaligned_hw, uint32_t, ASM_LOAD("ldr %0, [%1]"))
LOAD_LOOP(load64_aligned, uint64_t, ASM_LOAD("ldrd %0, %H0, [%1]"))
LOAD_LOOP(load64_ldrd, uint64_t, ASM_LOAD("ldrd %0, %H0, [%1]"))

/* LDM loads the lower-numbered register from the lower address: r2 gets
 * the low word (little-endian), r3 the high word. */
__attribute__((noinline, no_icf)) static uint64_t load64_ldm(const unsigned char *p, unsigned long iters)
{
    register uint32_t lo __asm__("r2") = 0;
    register uint32_t hi __asm__("r3") = 0;
    for (unsigned long i = 0; i < iters; i++)
        __asm__ volatile("ldm %2, {r2, r3}" : "=r"(lo), "=r"(hi) : "r"(p) : "memory");
    return (uint64_t)hi << 32 | lo;
}
#else
/* a plain load through a pointer whose alignment gcc cannot see */
#define C_LOAD(type) TL_HIDE(p); v = *(const type *)p; TL_USE(v)
LOAD_LOOP(load32_aligned, uint32_t, C_LOAD(uint32_t))
LOAD_LOOP(load32_unaligned_hw, uint32_t, C_LOAD(uint32_t))
LOAD_LOOP(load64_aligned, uint64_t, C_LOAD(uint64_t))
LOAD_LOOP(load64_ldrd, uint64_t, C_LOAD(uint64_t))
LOAD_LOOP(load64_ldm, uint64_t, C_LOAD(uint64_t))
#endif

/* The "software fixup": gcc may assume no alignment for a packed struct and
 * builds the value from byte loads, like the original's gcc 4.6. (gcc 12 for
 * -march=armv6 has -munaligned-access on, but uses an unaligned LDR only for
 * memcpy-style accesses, not for a packed field; disasm.yaml checks it.) */
#define PACKED_LOAD(ptype) TL_HIDE(p); v = ((const struct ptype *)p)->v; TL_USE(v)
LOAD_LOOP(load32_packed, uint32_t, PACKED_LOAD(p32))
LOAD_LOOP(load64_packed, uint64_t, PACKED_LOAD(p64))

/* ------------------------------------------------------------ SIGBUS */

static char skip_line[160];

static void sigbus_report(int sig)
{
    ssize_t w = write(1, skip_line, strlen(skip_line));
    (void)w;
    _exit(0);
}

/* The ARM kernel's alignment-fixup counters, or -1 when there are none. */
static int read_alignment(uint64_t *user, uint64_t *dword, uint64_t *multi)
{
    FILE *f = fopen("/proc/cpu/alignment", "r");
    if (!f)
        return -1;
    char line[128];
    int found = 0;
    *user = *dword = *multi = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long v;
        if (sscanf(line, "User: %llu", &v) == 1)
            *user = v, found++;
        else if (sscanf(line, "DWord: %llu", &v) == 1)
            *dword = v, found++;
        else if (sscanf(line, "Multi: %llu", &v) == 1)
            *multi = v, found++;
    }
    fclose(f);
    return found ? 0 : -1;
}

/* --------------------------------------------------------- measurement */

struct ctx {
    const unsigned char *p;
    unsigned long iters;
    int width;
    const char *variant;
    uint64_t last;
};

static uint64_t body(void *vc)
{
    struct ctx *c = vc;
    const char *v = c->variant;
    if (c->width == 32) {
        if (!strcmp(v, "aligned"))
            c->last = load32_aligned(c->p, c->iters);
        else if (!strcmp(v, "unaligned-hw"))
            c->last = load32_unaligned_hw(c->p, c->iters);
        else
            c->last = load32_packed(c->p, c->iters);
    } else {
        if (!strcmp(v, "aligned"))
            c->last = load64_aligned(c->p, c->iters);
        else if (!strcmp(v, "unaligned-ldrd"))
            c->last = load64_ldrd(c->p, c->iters);
        else if (!strcmp(v, "unaligned-ldm"))
            c->last = load64_ldm(c->p, c->iters);
        else
            c->last = load64_packed(c->p, c->iters);
    }
    return c->iters;
}

int main(int argc, char **argv)
{
    struct tl_opts o = tl_start("armv6-unaligned", argc, argv, args);
    int width = atoi(tl_choice(args, "width", "32|64"));
    const char *variant = tl_choice(args, "variant",
                                    width == 32 ? "aligned|unaligned-hw|packed"
                                                : "aligned|unaligned-ldrd|unaligned-ldm|packed");
    int kernel_fixup = !strcmp(variant, "unaligned-ldrd") || !strcmp(variant, "unaligned-ldm");
    /* a kernel fixup is ~50 us in QEMU */
    long long iters = tl_quick_int(args, "iters", o.quick, kernel_fixup ? 2000 : 100000);
    if (iters <= 0 || (unsigned long long)iters > ULONG_MAX)
        tl_fail("iters must be 1..%lu", ULONG_MAX);
    int offset = strcmp(variant, "aligned") ? 1 : 0;

    static unsigned char buf[16] __attribute__((aligned(16)));
    for (int i = 0; i < 16; i++)
        buf[i] = (unsigned char)i;
    const unsigned char *p = buf + offset;

    /* the value the load must produce, in this machine's byte order */
    uint64_t ref;
    if (width == 32) {
        uint32_t r32;
        memcpy(&r32, p, 4);
        ref = r32;
    } else {
        memcpy(&ref, p, 8);
    }
    uint16_t one = 1;
    const char *endian = *(unsigned char *)&one ? "little" : "big";

    tl_header("variant=%s width=%d offset=%d iters=%llu endian=%s", variant, width, offset, (unsigned long long)iters,
              endian);

    snprintf(skip_line, sizeof skip_line, "TL exp=%s kind=skip variant=%s reason=sigbus_no_alignment_fixup width=%d\n",
             tl_exp, variant, width);
    signal(SIGBUS, sigbus_report);

    uint64_t u0, d0, m0, u1, d1, m1;
    int have_proc = read_alignment(&u0, &d0, &m0) == 0;
    fflush(stdout); /* the SIGBUS reporter writes with write(2) */

    struct ctx c = {.p = p, .iters = (unsigned long)iters, .width = width, .variant = variant};
    char params[128];
    snprintf(params, sizeof params, "width=%d offset=%d iters=%llu", width, offset, (unsigned long long)iters);
    tl_measure_rusage(variant, params, o.warmup, o.reps, body, &c);
    if (o.reps + o.warmup == 0)
        body(&c);

    if (have_proc && read_alignment(&u1, &d1, &m1) == 0) {
        char cp[160];
        snprintf(cp, sizeof cp, "%s runs=%d", params, o.reps + o.warmup);
        tl_count(variant, "alignment_fixups_user", u1 - u0, cp);
        tl_count(variant, "alignment_fixups_dword", d1 - d0, cp);
        tl_count(variant, "alignment_fixups_multi", m1 - m0, cp);
        /* every run (warm-up included) executed iters loads: the counters above
         * must have risen by exactly this for the kernel-fixed variants */
        tl_count(variant, "loads", (uint64_t)iters * (uint64_t)(o.reps + o.warmup ? o.reps + o.warmup : 1), cp);
    } else {
        tl_info("proc_cpu_alignment=absent");
    }

    char cparams[160];
    snprintf(cparams, sizeof cparams, "%s endian=%s", params, endian);
    if (width == 32)
        tl_check(variant, cparams, "%#" PRIx32, (uint32_t)c.last);
    else
        tl_check(variant, cparams, "%#" PRIx64, c.last);
    if (c.last != ref) {
        fprintf(stderr, "%s: loaded %#" PRIx64 ", expected %#" PRIx64 "\n", tl_exp, c.last, ref);
        return 1;
    }
    return 0;
}
