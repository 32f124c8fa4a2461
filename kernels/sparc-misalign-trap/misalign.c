/*
 * sparc-misalign-trap - misaligned 4-byte loads fixed up by a trap, against
 * the same loads compiled as byte loads.
 *
 * From the method in shared/claims.md E1 ("Memory alignment on SPARC, or a
 * 300x speedup!"): an array of 100 records {int a; int b;} allocated with
 * room for one more record; the "unaligned" array starts one byte past the
 * allocation, the "aligned" one at the allocation. The records are filled
 * with i and i+5, then a+b of every record is summed in an outer loop of
 * 10,000 repetitions: 2,000,000 misaligned 4-byte loads when unaligned.
 *
 * Modes (key mode=):
 *   trap      plain int loads through a struct pointer whose alignment gcc
 *             cannot know (TL_HIDE): the Sun cc -xmemalign=4i case. On
 *             sparc64 these are 4-byte word loads, which trap when the
 *             address is not a multiple of 4.
 *   bytewise  the same loop over a packed struct, so gcc assumes nothing
 *             about alignment: the -xmemalign=1s case. On sparc64 and armv6
 *             gcc assembles every int from four byte loads; on x86_64 it
 *             still emits one mov (the hardware handles any alignment).
 *
 * Solaris fixed a misaligned user load up in the kernel. Linux/sparc64 does
 * not: it sends SIGBUS (BUS_ADRALN). Key fixup= chooses what we do:
 *   none    (default) the first SIGBUS prints kind=skip
 *           reason=sigbus_no_kernel_fixup and the kernel exits 0;
 *   sigbus  on sparc64 a SIGBUS handler emulates the faulting load (or
 *           store) with byte loads, writes the destination register and
 *           steps over the instruction, counting traps (kind=count
 *           name=traps). This is a user-space stand-in for the Solaris
 *           kernel fixup, and costs a full signal delivery per access. On
 *           other architectures no SIGBUS arrives and the key only changes
 *           the labels.
 * The fill uses memcpy so that only the measured sum touches the records
 * with word loads.
 */
#include "trapline.h"
#include <signal.h>
#include <unistd.h>

TL_ARGS({"mode", "trap", "[choice] trap|bytewise (4-byte int loads, or a packed struct: byte loads)"},
        {"align", "unaligned", "[choice] aligned|unaligned (array at the allocation or one byte past it)"},
        {"fixup", "none", "[choice] none|sigbus (sigbus: a SIGBUS handler emulates misaligned loads, sparc64)"},
        {"records", "100", "[int 1..100000000] records {int a; int b;} in the array"},
        {"outer", "10000", "[int 1..1000000000] outer repetitions of the summing loop (quick: 100, 10 with fixup=sigbus)"});

struct rec {
    int a;
    int b;
};

/* The -xmemalign=1s equivalent: gcc may assume no alignment at all. */
struct prec {
    int a;
    int b;
} __attribute__((packed));

/* The measured loops, one per record type. noinline and named for
 * disasm.yaml: on sparc64 sum_trap must load with `ld`/`lduw` (4-byte) and
 * sum_bytewise with `ldub`. The barrier after every outer repetition forces
 * the loads to be redone. */
#define SUM_LOOP(name, rec_type)                                                              \
    __attribute__((noinline)) static uint64_t name(const volatile rec_type *r, long n, long outer) \
    {                                                                                         \
        uint64_t s = 0;                                                                       \
        for (long o = 0; o < outer; o++) {                                                    \
            unsigned int t = 0;                                                               \
            for (long i = 0; i < n; i++)                                                      \
                t += (unsigned int)(r[i].a + r[i].b);                                         \
            s += t;                                                                           \
            tl_compiler_barrier();                                                            \
        }                                                                                     \
        return s;                                                                             \
    }
SUM_LOOP(sum_trap, struct rec)
SUM_LOOP(sum_bytewise, struct prec)

/* ------------------------------------------------------------ SIGBUS */

static volatile unsigned long traps; /* SIGBUS deliveries emulated */
static const char *skip_line = "";   /* preformatted for the reporter */

/* Without a fixup a misaligned access ends the run: say so in the TL format
 * (only async-signal-safe calls here) and exit 0, as for any skip. */
static void sigbus_report(int sig, siginfo_t *si, void *vctx)
{
    ssize_t w = write(1, skip_line, strlen(skip_line));
    (void)w;
    _exit(0);
}

#if defined(__sparc__) && defined(__arch64__)
/*
 * The sparc64 Linux signal frame, as set up by setup_rt_frame() in
 * arch/sparc/kernel/signal_64.c: struct rt_signal_frame { struct sparc_stackf
 * ss; siginfo_t info; struct pt_regs regs; ... }. The handler's third
 * argument is &frame->info, which glibc describes as struct sigcontext
 * (bits/sigcontext.h: 128 bytes of siginfo, then sigc_regs with
 * u_regs[16], tstate, tpc, tnpc, y). u_regs[0..7] are %g0-%g7 and
 * u_regs[8..15] the interrupted window's outs %o0-%o7; rt_sigreturn copies
 * u_regs, tpc and tnpc back, so writing them here changes the interrupted
 * context.
 *
 * The locals and ins (%l0-%l7, %i0-%i7) are not in pt_regs. The kernel
 * flushes the user windows before building the frame, copies the
 * interrupted window's locals and ins into frame->ss (the 192-byte
 * struct sparc_stackf just below info), and on return refills that window
 * from its save area on the user stack, at the interrupted %sp + 2047 (the
 * V9 stack bias). qemu-sparc64 user mode (7.2) builds the same frame but
 * does not flush: the interrupted window is still in the register file and
 * spills to frame->ss (its %sp now points at the frame) once the handler
 * executes flushw. So: flushw, read %l/%i from frame->ss, and write a new
 * value both there and to the save area at the old %sp. (If the kernel
 * could not flush a window it passes it in the frame's rwin_save area
 * instead; that needs an unmapped stack page and is not handled here.)
 */
#define SPARC_STACK_BIAS 2047
#define SPARC_STACKF_SIZE 192 /* struct sparc_stackf: 24 longs */

__attribute__((noinline)) static void sparc_flushw(void)
{
    __asm__ volatile("flushw" ::: "memory");
}

static unsigned long reg_read(struct sigcontext *sc, unsigned r)
{
    if (r == 0)
        return 0; /* %g0 */
    if (r < 16)
        return sc->sigc_regs.u_regs[r];
    return ((unsigned long *)((char *)sc - SPARC_STACKF_SIZE))[r - 16];
}

static void reg_write(struct sigcontext *sc, unsigned r, unsigned long v)
{
    if (r == 0)
        return; /* a write to %g0 is discarded */
    if (r < 16) {
        sc->sigc_regs.u_regs[r] = v;
        return;
    }
    ((unsigned long *)((char *)sc - SPARC_STACKF_SIZE))[r - 16] = v;
    ((unsigned long *)(sc->sigc_regs.u_regs[14] + SPARC_STACK_BIAS))[r - 16] = v;
}

/* Emulate one format-3 integer load/store (op=3): decode rd, op3, rs1 and
 * rs2 or simm13, build the value from single bytes (big-endian), write rd,
 * then continue at nPC (tpc = tnpc, tnpc += 4: correct also when the access
 * sat in a delay slot). */
static void sigbus_emulate(int sig, siginfo_t *si, void *vctx)
{
    struct sigcontext *sc = vctx;
    sparc_flushw();
    uint32_t insn = *(const uint32_t *)sc->sigc_regs.tpc;
    unsigned rd = (insn >> 25) & 31, op3 = (insn >> 19) & 63, rs1 = (insn >> 14) & 31;
    unsigned long addr;
    int size, sign = 0, store = 0;

    if ((insn >> 30) != 3)
        goto unhandled;
    switch (op3) {
    case 0x00: size = 4; break;              /* lduw */
    case 0x08: size = 4; sign = 1; break;    /* ldsw */
    case 0x02: size = 2; break;              /* lduh */
    case 0x0a: size = 2; sign = 1; break;    /* ldsh */
    case 0x0b: size = 8; break;              /* ldx */
    case 0x04: size = 4; store = 1; break;   /* stw */
    case 0x06: size = 2; store = 1; break;   /* sth */
    case 0x0e: size = 8; store = 1; break;   /* stx */
    default: goto unhandled;
    }
    addr = reg_read(sc, rs1);
    if (insn & (1u << 13))
        addr += (unsigned long)(long)((int32_t)(insn << 19) >> 19); /* simm13 */
    else
        addr += reg_read(sc, insn & 31);
    if ((void *)addr != si->si_addr)
        goto unhandled;

    volatile unsigned char *p = (volatile unsigned char *)addr;
    if (store) {
        unsigned long v = reg_read(sc, rd);
        for (int i = size - 1; i >= 0; i--, v >>= 8)
            p[i] = (unsigned char)v;
    } else {
        unsigned long v = 0;
        for (int i = 0; i < size; i++)
            v = (v << 8) | p[i];
        if (sign && size < 8)
            v = (unsigned long)((long)(v << (64 - 8 * size)) >> (64 - 8 * size));
        reg_write(sc, rd, v);
    }
    sc->sigc_regs.tpc = sc->sigc_regs.tnpc;
    sc->sigc_regs.tnpc += 4;
    traps++;
    return;
unhandled:
    skip_line = "TL exp=sparc-misalign-trap kind=skip variant=trap reason=sigbus_not_emulated\n";
    sigbus_report(sig, si, vctx);
}
#define HAVE_EMULATION 1
#else
#define HAVE_EMULATION 0
#endif

static void install_sigbus(void (*fn)(int, siginfo_t *, void *))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fn;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, NULL)) {
        perror("sigaction");
        exit(1);
    }
}

/* --------------------------------------------------------- measurement */

struct ctx {
    const void *base;
    long n, outer;
    int bytewise;
    uint64_t sum;
    unsigned long traps_last, runs;
};

static uint64_t body(void *vc)
{
    struct ctx *c = vc;
    const void *p = c->base;
    TL_HIDE(p);
    unsigned long t0 = traps;
    c->sum = c->bytewise ? sum_bytewise(p, c->n, c->outer) : sum_trap(p, c->n, c->outer);
    c->traps_last = traps - t0;
    c->runs++;
    return 2 * (uint64_t)c->n * (uint64_t)c->outer; /* 4-byte loads */
}

int main(int argc, char **argv)
{
    struct tl_opts o = tl_start("sparc-misalign-trap", argc, argv, args);
    const char *mode = tl_choice(args, "mode", "trap|bytewise");
    const char *align = tl_choice(args, "align", "aligned|unaligned");
    const char *fixup = tl_choice(args, "fixup", "none|sigbus");
    /* a signal per load is ~40 us in QEMU */
    long n = tl_int(args, "records");
    long outer = tl_quick_int(args, "outer", o.quick, !strcmp(fixup, "sigbus") ? 10 : 100);
    if (n <= 0 || outer <= 0 || o.reps < 0 || o.warmup < 0)
        tl_fail("records and outer must be > 0");
    int unaligned = !strcmp(align, "unaligned");
    int emulate = !strcmp(fixup, "sigbus") && HAVE_EMULATION;

    /* room for one more record, so base + 1 stays inside the allocation */
    char *alloc = tl_aligned_alloc(16, (size_t)(n + 1) * sizeof(struct rec));
    char *base = alloc + (unaligned ? 1 : 0);
    for (long i = 0; i < n; i++) {
        int ab[2] = {(int)i, (int)i + 5};
        memcpy(base + i * sizeof(struct rec), ab, sizeof ab);
    }
    tl_header("mode=%s align=%s fixup=%s fixup_active=%d records=%ld outer=%ld misalign=%u", mode, align, fixup,
              emulate, n, outer, (unsigned)((uintptr_t)base & 7));

    static char skip_buf[160];
    snprintf(skip_buf, sizeof skip_buf, "TL exp=%s kind=skip variant=%s reason=sigbus_no_kernel_fixup align=%s\n",
             tl_exp, mode, align);
    skip_line = skip_buf;
    install_sigbus(sigbus_report);
#if HAVE_EMULATION
    if (emulate)
        install_sigbus(sigbus_emulate);
#endif
    fflush(stdout); /* the SIGBUS reporter writes with write(2) */

    struct ctx c = {.base = base, .n = n, .outer = outer, .bytewise = !strcmp(mode, "bytewise")};
    char params[160];
    snprintf(params, sizeof params, "align=%s fixup=%s records=%ld outer=%ld", align, fixup, n, outer);
    tl_measure_rusage(mode, params, o.warmup, o.reps, body, &c);
    if (!c.runs)
        body(&c);

    uint64_t ref = (uint64_t)outer * (uint64_t)(n * (n - 1) + 5 * n); /* sum of i + (i+5) */
    tl_check(mode, params, "%" PRIu64, c.sum);
    if (!strcmp(fixup, "sigbus")) {
        char cparams[200];
        snprintf(cparams, sizeof cparams, "%s per=run fixup_active=%d", params, emulate);
        tl_count(mode, "traps", c.traps_last, cparams);
        /* the 4-byte loads of that one run: traps must equal this when unaligned */
        tl_count(mode, "loads", 2 * (uint64_t)n * (uint64_t)outer, cparams);
    }
    if (c.sum != ref) {
        fprintf(stderr, "%s: sum %" PRIu64 " != reference %" PRIu64 "\n", tl_exp, c.sum, ref);
        return 1;
    }
    return 0;
}
