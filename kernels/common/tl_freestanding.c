/*
 * tl_freestanding.c - the C library of the sparc64 kernels in the gem5 flavour.
 *
 * Why: gem5's SE mode answers a sparc64 program's system calls from its own
 * table (gem5 src/arch/sparc/linux/syscalls.cc, EmuLinux::syscallDescs), and a
 * call the table names without a function is fatal ("syscall set_tid_address
 * (#166) unimplemented", src/sim/syscall_emul.cc unimplementedFunc), one past
 * its end (#283) too ("Syscall 300 out of range", src/sim/syscall_desc.hh).
 * Debian's static glibc 2.36 makes seven such calls before main() or in the
 * kernels' clock (set_tid_address, set_robust_list, prlimit64, getrandom,
 * clock_getres, clock_gettime, getrusage: qemu-sparc64 -strace), so a glibc
 * binary stops at its first one. This file replaces glibc for the kernels
 * that opt in (kernels/common/freestanding.mk): it uses only calls gem5
 * implements (write #4, brk #17, gettimeofday #116, exit_group #188) and
 * rt_sigaction #102, which gem5 ignores.
 *
 * It provides the functions the sparc kernels and trapline.h call, with
 * glibc's prototypes (glibc's headers are included, so a mismatch does not
 * compile; the kernels compile as in the default build, only the link
 * differs: -nostdlib, this file, libgcc):
 *   _start          Linux's sparc64 initial stack (argc at %sp + 2047 + 128,
 *                   argv after it, then envp), which gem5's SE loader lays out
 *                   the same way (src/arch/sparc/process.cc, argsInit)
 *   stdio           printf, fprintf, vprintf, vfprintf, snprintf, vsnprintf,
 *                   sprintf, puts, fputs, fputc, putc, putchar, fwrite, fflush,
 *                   perror. stdout is line-buffered (and flushed by fflush and
 *                   exit), stderr unbuffered; both write(2) to fd 1 and 2.
 *                   Formats: flags - 0 + space #, width and precision (numbers
 *                   or *), lengths hh h l ll z j t, conversions d i u o x X c
 *                   s p %. No floating point: a conversion outside this list
 *                   is copied to the output as written (and reported once on
 *                   stderr), never silently dropped.
 *   strings         strlen strcmp strncmp strchr memcpy memmove memset memcmp
 *   numbers         strtol strtoll strtoul strtoull atoi (errno = ERANGE on
 *                   overflow, as C says)
 *   memory          malloc calloc posix_memalign aligned_alloc over brk(2);
 *                   free does nothing (the kernels allocate once and exit)
 *   time            clock_gettime and clock_getres read gettimeofday(2), which
 *                   gem5 answers with its simulated time in microseconds
 *                   (src/sim/syscall_emul.hh gettimeofdayFunc ->
 *                   getElapsedTimeMicro: curTick() / ticks per us): the
 *                   kernels' ns= figures are simulated time at 1 us resolution,
 *                   and clock_getres says 1000 ns. getrusage reports the same
 *                   elapsed simulated time as user time and no system time,
 *                   exactly what gem5's own getrusage does for the ISAs that
 *                   implement it (src/sim/syscall_emul.hh getrusageFunc: in SE
 *                   no kernel runs; a system call takes no simulated time).
 *   signals         sigaction through rt_sigaction(2) (Linux sparc64's form,
 *                   with a rt_sigreturn stub), sigemptyset. gem5 SE ignores
 *                   rt_sigaction (ignoreFunc) and delivers no signal.
 *   exit, _exit     exit_group(2); exit flushes stdout first (no atexit).
 *   errno           __errno_location (one thread).
 *
 * The same binary runs under qemu-sparc64 (user mode, real Linux system call
 * semantics), which is how tests/test_88_sparc_gem5.py checks the formatting
 * against glibc's.
 */
#if !defined(__sparc__) || !defined(__arch64__)
#error "tl_freestanding.c is the sparc64 runtime of the gem5 flavour (kernels/common/freestanding.mk)"
#endif

#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* gcc may turn the byte loops of memcpy, memmove and memset into calls to
 * memcpy, memmove and memset themselves. */
#define TL_NO_LIBCALL __attribute__((optimize("no-tree-loop-distribute-patterns")))

int main(int argc, char **argv);

/* ------------------------------------------------------------ system calls */

/* Linux sparc64 system call numbers (arch/sparc/include/uapi/asm/unistd.h),
 * the numbers of gem5's table too. */
enum {
    TL_NR_write = 4,
    TL_NR_brk = 17,
    TL_NR_rt_sigreturn = 101,
    TL_NR_rt_sigaction = 102,
    TL_NR_gettimeofday = 116,
    TL_NR_exit_group = 188,
};

/* Number in %g1, arguments in %o0-%o5, `ta 0x6d` (the 64-bit Linux trap,
 * gem5 src/arch/sparc/linux/se_workload.cc handleTrap); the carry flag set
 * means %o0 holds a positive errno (gem5 src/arch/sparc/se_workload.hh
 * Result<SyscallReturn>). Returns -errno on failure. */
static long tl_syscall(long n, long a0, long a1, long a2, long a3, long a4)
{
    register long g1 __asm__("g1") = n;
    register long o0 __asm__("o0") = a0;
    register long o1 __asm__("o1") = a1;
    register long o2 __asm__("o2") = a2;
    register long o3 __asm__("o3") = a3;
    register long o4 __asm__("o4") = a4;
    __asm__ volatile("ta 0x6d\n\t"
                     "bcs,a,pn %%xcc, 1f\n\t"
                     " sub %%g0, %%o0, %%o0\n"
                     "1:"
                     : "+r"(g1), "+r"(o0), "+r"(o1)
                     : "r"(o2), "r"(o3), "r"(o4)
                     : "memory", "cc");
    return o0;
}

static void tl_exit_group(int status) __attribute__((noreturn));
static void tl_exit_group(int status)
{
    for (;;)
        tl_syscall(TL_NR_exit_group, status, 0, 0, 0, 0);
}

static int tl_errno;

int *__errno_location(void)
{
    return &tl_errno;
}

ssize_t write(int fd, const void *buf, size_t n)
{
    long r = tl_syscall(TL_NR_write, fd, (long)buf, (long)n, 0, 0);
    if (r < 0) {
        tl_errno = (int)-r;
        return -1;
    }
    return r;
}

/* Write all of buf (a short write is retried). */
static void tl_write_all(int fd, const char *buf, size_t n)
{
    while (n) {
        ssize_t w = write(fd, buf, n);
        if (w <= 0)
            return;
        buf += w, n -= (size_t)w;
    }
}

/* ------------------------------------------------------------------- start */

/* The process entry point: %sp + 2047 (the V9 stack bias) is the lowest
 * word of the initial frame, a 16-word register save area; argc is the word
 * after it, argv follows. Leave that frame alone, open a minimal frame below
 * it (176 bytes: a 16-word save area and the six outgoing argument words that
 * a callee may store into; a multiple of 16, so %sp + 2047 stays aligned),
 * clear %fp (the outermost frame) and call tl_start_c(argc, argv). */
__asm__(".section \".text\"\n"
        ".align 4\n"
        ".global _start\n"
        ".type _start, #function\n"
        "_start:\n"
        "\tclr %fp\n"
        "\tldx [%sp + 2047 + 128], %o0\n"
        "\tadd %sp, 2047 + 136, %o1\n"
        "\tsub %sp, 176, %sp\n"
        "\tcall tl_start_c\n"
        "\t nop\n"
        "\tta 5\n" /* not reached */
        ".size _start, . - _start\n");

void tl_start_c(int argc, char **argv) __attribute__((noreturn, used));
void tl_start_c(int argc, char **argv)
{
    exit(main(argc, argv));
}

/* ------------------------------------------------------------------ strings */

size_t strlen(const char *s)
{
    const char *p = s;
    while (*p)
        p++;
    return (size_t)(p - s);
}

int strcmp(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return (unsigned char)*a - (unsigned char)*b;
}

int strncmp(const char *a, const char *b, size_t n)
{
    for (; n; n--, a++, b++) {
        if (*a != *b)
            return (unsigned char)*a - (unsigned char)*b;
        if (!*a)
            return 0;
    }
    return 0;
}

char *strchr(const char *s, int c)
{
    for (;; s++) {
        if (*s == (char)c)
            return (char *)s;
        if (!*s)
            return NULL;
    }
}

TL_NO_LIBCALL void *memcpy(void *restrict d, const void *restrict s, size_t n)
{
    unsigned char *dp = d;
    const unsigned char *sp = s;
    while (n--)
        *dp++ = *sp++;
    return d;
}

TL_NO_LIBCALL void *memmove(void *d, const void *s, size_t n)
{
    unsigned char *dp = d;
    const unsigned char *sp = s;
    if (dp < sp)
        while (n--)
            *dp++ = *sp++;
    else
        while (n--)
            dp[n] = sp[n];
    return d;
}

TL_NO_LIBCALL void *memset(void *d, int c, size_t n)
{
    unsigned char *dp = d;
    while (n--)
        *dp++ = (unsigned char)c;
    return d;
}

int memcmp(const void *a, const void *b, size_t n)
{
    const unsigned char *ap = a, *bp = b;
    for (; n; n--, ap++, bp++)
        if (*ap != *bp)
            return *ap - *bp;
    return 0;
}

/* ------------------------------------------------------------------ numbers */

/* The one parser behind strto(u)l(l): C's rules (leading space, sign, base 0
 * = 0x / 0 / decimal prefixes, base 16 may start with 0x), the magnitude in
 * *mag, saturated at limit with ERANGE. Returns 0 when no digit was read
 * (then *end = s, as C says). */
static int tl_strtou(const char *s, char **end, int base, unsigned long long limit, unsigned long long *mag, int *neg)
{
    const char *p = s;
    while (*p == ' ' || (*p >= '\t' && *p <= '\r'))
        p++;
    *neg = 0;
    if (*p == '+' || *p == '-')
        *neg = *p++ == '-';
    if ((base == 0 || base == 16) && p[0] == '0' && (p[1] == 'x' || p[1] == 'X') &&
        ((p[2] >= '0' && p[2] <= '9') || ((p[2] | 32) >= 'a' && (p[2] | 32) <= 'f')))
        p += 2, base = 16;
    else if (base == 0)
        base = p[0] == '0' ? 8 : 10;
    if (base < 2 || base > 36) {
        tl_errno = EINVAL;
        if (end)
            *end = (char *)s;
        return 0;
    }
    unsigned long long v = 0;
    int any = 0, over = 0;
    for (;; p++) {
        int d;
        if (*p >= '0' && *p <= '9')
            d = *p - '0';
        else if ((*p | 32) >= 'a' && (*p | 32) <= 'z')
            d = (*p | 32) - 'a' + 10;
        else
            break;
        if (d >= base)
            break;
        any = 1;
        if (v > (limit - (unsigned long long)d) / (unsigned long long)base)
            over = 1;
        else
            v = v * (unsigned long long)base + (unsigned long long)d;
    }
    if (end)
        *end = (char *)(any ? p : s);
    if (over) {
        tl_errno = ERANGE;
        v = limit;
    }
    *mag = v;
    return any;
}

long long strtoll(const char *restrict s, char **restrict end, int base)
{
    unsigned long long m;
    int neg;
    /* the limit is LLONG_MAX + 1 for a negative number, LLONG_MAX otherwise */
    const char *p = s;
    while (*p == ' ' || (*p >= '\t' && *p <= '\r'))
        p++;
    unsigned long long limit = *p == '-' ? (unsigned long long)INT64_MAX + 1 : (unsigned long long)INT64_MAX;
    if (!tl_strtou(s, end, base, limit, &m, &neg))
        return 0;
    return neg ? (long long)(0 - m) : (long long)m;
}

long strtol(const char *restrict s, char **restrict end, int base)
{
    return (long)strtoll(s, end, base); /* long is 64 bits on sparc64 */
}

unsigned long long strtoull(const char *restrict s, char **restrict end, int base)
{
    unsigned long long m;
    int neg;
    if (!tl_strtou(s, end, base, UINT64_MAX, &m, &neg))
        return 0;
    return neg ? 0 - m : m;
}

unsigned long strtoul(const char *restrict s, char **restrict end, int base)
{
    return (unsigned long)strtoull(s, end, base);
}

int atoi(const char *s)
{
    return (int)strtol(s, NULL, 10);
}

/* ------------------------------------------------------------------- memory */

static char *tl_brk_cur, *tl_brk_end;

/* Bump allocator over brk(2), which gem5 implements (brkFunc). */
static void *tl_alloc(size_t align, size_t size)
{
    if (!tl_brk_cur)
        tl_brk_cur = tl_brk_end = (char *)tl_syscall(TL_NR_brk, 0, 0, 0, 0, 0);
    uintptr_t p = ((uintptr_t)tl_brk_cur + align - 1) & ~(uintptr_t)(align - 1);
    if (size > (uintptr_t)-1 - p - 8192) {
        tl_errno = ENOMEM;
        return NULL;
    }
    char *want = (char *)(p + size);
    if (want > tl_brk_end) {
        char *top = (char *)(((uintptr_t)want + 8191) & ~(uintptr_t)8191);
        char *got = (char *)tl_syscall(TL_NR_brk, (long)top, 0, 0, 0, 0);
        if (got < top) {
            tl_errno = ENOMEM;
            return NULL;
        }
        tl_brk_end = got;
    }
    tl_brk_cur = want;
    return (void *)p;
}

void *malloc(size_t size)
{
    return tl_alloc(16, size ? size : 1);
}

void *calloc(size_t n, size_t size)
{
    if (size && n > (size_t)-1 / size) {
        tl_errno = ENOMEM;
        return NULL;
    }
    void *p = malloc(n * size);
    return p ? memset(p, 0, n * size) : NULL; /* fresh brk memory is zero; repeat it for clarity */
}

int posix_memalign(void **out, size_t align, size_t size)
{
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    void *p = tl_alloc(align < 16 ? 16 : align, size ? size : 1);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t size)
{
    void *p;
    int e = posix_memalign(&p, align, size);
    if (e) {
        tl_errno = e;
        return NULL;
    }
    return p;
}

void free(void *p)
{
    (void)p; /* a bump allocator: the kernels allocate once and exit */
}

/* --------------------------------------------------------------------- time */

/* gem5 writes struct timeval as two 64-bit words (src/kern/linux/linux.hh);
 * Linux sparc64 has a 32-bit tv_usec in the first half of the second word
 * (arch/sparc/include/uapi/asm/posix_types.h: __kernel_suseconds_t is int),
 * which reads as usec << 32 here: both are accepted, so the same binary
 * keeps time under qemu-sparc64 too. */
static uint64_t tl_gettimeofday_ns(void)
{
    int64_t tv[2] = {0, 0};
    tl_syscall(TL_NR_gettimeofday, (long)tv, 0, 0, 0, 0);
    uint64_t usec = (uint64_t)tv[1];
    if (usec >= 1000000)
        usec >>= 32;
    return (uint64_t)tv[0] * 1000000000ull + usec * 1000ull;
}

int clock_gettime(clockid_t clk, struct timespec *ts)
{
    (void)clk; /* monotonic and realtime alike: gem5's simulated time */
    uint64_t ns = tl_gettimeofday_ns();
    ts->tv_sec = (time_t)(ns / 1000000000ull);
    ts->tv_nsec = (long)(ns % 1000000000ull);
    return 0;
}

int clock_getres(clockid_t clk, struct timespec *res)
{
    (void)clk;
    if (res) {
        res->tv_sec = 0;
        res->tv_nsec = 1000; /* gettimeofday's microsecond */
    }
    return 0;
}

int getrusage(int who, struct rusage *ru)
{
    (void)who;
    memset(ru, 0, sizeof *ru);
    uint64_t us = tl_gettimeofday_ns() / 1000;
    ru->ru_utime.tv_sec = (time_t)(us / 1000000);
    ru->ru_utime.tv_usec = (suseconds_t)(us % 1000000);
    return 0;
}

/* ------------------------------------------------------------------ signals */

/* Linux sparc64's struct __new_sigaction (arch/sparc/include/uapi/asm/signal.h)
 * and rt_sigaction(sig, act, oact, restorer, sigsetsize): a handler returns
 * to restorer + 8 (`ret` is jmpl %i7 + 8), so the stub's address - 8 is
 * passed, as glibc does (sysdeps/unix/sysv/linux/sparc/sparc64/sigaction.c). */
struct tl_kernel_sigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    unsigned long mask;
};

void tl_rt_sigreturn_stub(void);
__asm__(".section \".text\"\n"
        ".align 4\n"
        ".global tl_rt_sigreturn_stub\n"
        ".type tl_rt_sigreturn_stub, #function\n"
        "tl_rt_sigreturn_stub:\n"
        "\tmov 101, %g1\n" /* TL_NR_rt_sigreturn */
        "\tta 0x6d\n"
        ".size tl_rt_sigreturn_stub, . - tl_rt_sigreturn_stub\n");

int sigemptyset(sigset_t *set)
{
    memset(set, 0, sizeof *set);
    return 0;
}

int sigaction(int sig, const struct sigaction *restrict act, struct sigaction *restrict old)
{
    struct tl_kernel_sigaction k, ko;
    if (act) {
        k.handler = act->sa_handler;
        k.flags = (unsigned long)act->sa_flags;
        k.restorer = NULL;
        memcpy(&k.mask, &act->sa_mask, sizeof k.mask);
    }
    long r = tl_syscall(TL_NR_rt_sigaction, sig, act ? (long)&k : 0, old ? (long)&ko : 0,
                        (long)tl_rt_sigreturn_stub - 8, sizeof k.mask);
    if (r < 0) {
        tl_errno = (int)-r;
        return -1;
    }
    if (old) {
        memset(old, 0, sizeof *old);
        old->sa_handler = ko.handler;
        old->sa_flags = (int)ko.flags;
        memcpy(&old->sa_mask, &ko.mask, sizeof ko.mask);
    }
    return 0;
}

/* -------------------------------------------------------------------- stdio */

/* The three FILE objects are tokens: only their addresses are compared. */
static FILE tl_stdin_file, tl_stdout_file, tl_stderr_file;
FILE *stdin = &tl_stdin_file;
FILE *stdout = &tl_stdout_file;
FILE *stderr = &tl_stderr_file;

static char tl_outbuf[4096];
static size_t tl_outlen;

int fflush(FILE *f)
{
    if ((f == stdout || !f) && tl_outlen) {
        tl_write_all(1, tl_outbuf, tl_outlen);
        tl_outlen = 0;
    }
    return 0;
}

/* stdout: buffered up to a newline (line-buffered); stderr: written at once. */
static void tl_put(FILE *f, const char *s, size_t n)
{
    if (f != stdout) {
        tl_write_all(f == stderr ? 2 : 1, s, n);
        return;
    }
    while (n) {
        size_t k = sizeof tl_outbuf - tl_outlen;
        if (k > n)
            k = n;
        memcpy(tl_outbuf + tl_outlen, s, k);
        tl_outlen += k, s += k, n -= k;
        if (tl_outlen == sizeof tl_outbuf || memchr(tl_outbuf + tl_outlen - k, '\n', k))
            fflush(stdout);
    }
}

void *memchr(const void *s, int c, size_t n)
{
    const unsigned char *p = s;
    for (; n; n--, p++)
        if (*p == (unsigned char)c)
            return (void *)p;
    return NULL;
}

/* The formatter: writes to a sink, one span at a time. */
struct tl_sink {
    char *buf; /* snprintf: the buffer, NULL for a FILE */
    size_t cap, len;
    FILE *f;
    char tmp[256]; /* a FILE's staging buffer */
    size_t tlen;
};

static void tl_emit(struct tl_sink *k, const char *s, size_t n)
{
    if (k->buf) {
        if (k->len < k->cap) {
            size_t room = k->cap - k->len;
            memcpy(k->buf + k->len, s, n < room ? n : room);
        }
    } else {
        if (k->tlen + n > sizeof k->tmp) {
            tl_put(k->f, k->tmp, k->tlen);
            k->tlen = 0;
        }
        if (n > sizeof k->tmp)
            tl_put(k->f, s, n);
        else
            memcpy(k->tmp + k->tlen, s, n), k->tlen += n;
    }
    k->len += n;
}

static void tl_pad(struct tl_sink *k, char c, long n)
{
    char block[32];
    memset(block, c, sizeof block);
    while (n > 0) {
        long m = n < (long)sizeof block ? n : (long)sizeof block;
        tl_emit(k, block, (size_t)m);
        n -= m;
    }
}

static int tl_warned_conversion;

static void tl_format(struct tl_sink *k, const char *fmt, va_list ap)
{
    while (*fmt) {
        if (*fmt != '%') {
            const char *q = fmt;
            while (*q && *q != '%')
                q++;
            tl_emit(k, fmt, (size_t)(q - fmt));
            fmt = q;
            continue;
        }
        const char *start = fmt++;
        int left = 0, zero = 0, plus = 0, space = 0, alt = 0;
        for (;; fmt++) {
            if (*fmt == '-')
                left = 1;
            else if (*fmt == '0')
                zero = 1;
            else if (*fmt == '+')
                plus = 1;
            else if (*fmt == ' ')
                space = 1;
            else if (*fmt == '#')
                alt = 1;
            else
                break;
        }
        long width = 0;
        if (*fmt == '*') {
            width = va_arg(ap, int);
            if (width < 0)
                left = 1, width = -width;
            fmt++;
        } else
            while (*fmt >= '0' && *fmt <= '9')
                width = width * 10 + (*fmt++ - '0');
        long prec = -1;
        if (*fmt == '.') {
            fmt++;
            prec = 0;
            if (*fmt == '*') {
                prec = va_arg(ap, int);
                if (prec < 0)
                    prec = -1;
                fmt++;
            } else
                while (*fmt >= '0' && *fmt <= '9')
                    prec = prec * 10 + (*fmt++ - '0');
        }
        /* length: 'H' hh, 'h', 'l' (l, z, j, t: 64 bits on sparc64), 'L' ll */
        char len = 0;
        if (fmt[0] == 'h' && fmt[1] == 'h')
            len = 'H', fmt += 2;
        else if (fmt[0] == 'l' && fmt[1] == 'l')
            len = 'L', fmt += 2;
        else if (*fmt == 'h' || *fmt == 'l' || *fmt == 'z' || *fmt == 'j' || *fmt == 't')
            len = *fmt == 'h' ? 'h' : 'l', fmt++;
        char conv = *fmt ? *fmt++ : 0;

        char num[72]; /* digits of a 64-bit number in octal, with room */
        const char *body = num, *prefix = "";
        size_t blen = 0;
        int is_num = 0;
        switch (conv) {
        case '%':
            tl_emit(k, "%", 1);
            continue;
        case 'c': {
            num[0] = (char)va_arg(ap, int);
            blen = 1;
            break;
        }
        case 's': {
            body = va_arg(ap, const char *);
            if (!body)
                body = "(null)";
            blen = 0;
            while (body[blen] && (prec < 0 || (long)blen < prec))
                blen++;
            break;
        }
        case 'd':
        case 'i':
        case 'u':
        case 'o':
        case 'x':
        case 'X':
        case 'p': {
            unsigned long long v;
            int neg = 0;
            if (conv == 'p') {
                v = (uintptr_t)va_arg(ap, void *);
                if (!v) {
                    body = "(nil)", blen = 5; /* glibc's */
                    break;
                }
                alt = 1;
            } else if (conv == 'd' || conv == 'i') {
                long long s = len == 'L' || len == 'l' ? va_arg(ap, long long) : (long long)va_arg(ap, int);
                if (len == 'h')
                    s = (short)s;
                else if (len == 'H')
                    s = (signed char)s;
                neg = s < 0;
                v = neg ? 0 - (unsigned long long)s : (unsigned long long)s;
            } else {
                v = len == 'L' || len == 'l' ? va_arg(ap, unsigned long long) : (unsigned long long)va_arg(ap, unsigned);
                if (len == 'h')
                    v = (unsigned short)v;
                else if (len == 'H')
                    v = (unsigned char)v;
            }
            is_num = 1;
            int was_zero = v == 0;
            unsigned base = conv == 'o' ? 8 : (conv == 'x' || conv == 'X' || conv == 'p') ? 16 : 10;
            const char *digits = conv == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
            char *e = num + sizeof num, *p = e;
            while (v) {
                *--p = digits[v % base];
                v /= base;
            }
            /* precision: at least prec digits (default 1; 0 digits for 0 with .0) */
            long minimum = prec < 0 ? 1 : prec;
            while (e - p < minimum)
                *--p = '0';
            if (conv == 'o' && alt && (p == e || *p != '0'))
                *--p = '0';
            body = p, blen = (size_t)(e - p);
            if (neg)
                prefix = "-";
            else if ((conv == 'd' || conv == 'i') && plus)
                prefix = "+";
            else if ((conv == 'd' || conv == 'i') && space)
                prefix = " ";
            else if (alt && (conv == 'x' || conv == 'p') && !was_zero)
                prefix = "0x";
            else if (alt && conv == 'X' && !was_zero)
                prefix = "0X";
            if (prec >= 0)
                zero = 0; /* C: with a precision the 0 flag is ignored */
            break;
        }
        default:
            /* not supported (floating point, %n, ...): copy the directive as written */
            if (!tl_warned_conversion) {
                tl_warned_conversion = 1;
                static const char msg[] = "tl_freestanding: unsupported printf conversion copied as written\n";
                tl_write_all(2, msg, sizeof msg - 1);
            }
            tl_emit(k, start, (size_t)(fmt - start));
            continue;
        }
        size_t plen = strlen(prefix);
        long pad = width - (long)(blen + plen);
        if (!left && !(zero && is_num))
            tl_pad(k, ' ', pad);
        tl_emit(k, prefix, plen);
        if (!left && zero && is_num)
            tl_pad(k, '0', pad);
        tl_emit(k, body, blen);
        if (left)
            tl_pad(k, ' ', pad);
    }
}

int vsnprintf(char *restrict buf, size_t n, const char *restrict fmt, va_list ap)
{
    static char dummy;
    struct tl_sink k = {.buf = n ? buf : &dummy, .cap = n ? n - 1 : 0};
    tl_format(&k, fmt, ap);
    if (n)
        buf[k.len < k.cap ? k.len : k.cap] = 0;
    return (int)k.len;
}

int snprintf(char *restrict buf, size_t n, const char *restrict fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return r;
}

int sprintf(char *restrict buf, const char *restrict fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(buf, (size_t)INT32_MAX, fmt, ap);
    va_end(ap);
    return r;
}

int vfprintf(FILE *restrict f, const char *restrict fmt, va_list ap)
{
    struct tl_sink k = {.f = f};
    tl_format(&k, fmt, ap);
    if (k.tlen)
        tl_put(f, k.tmp, k.tlen);
    return (int)k.len;
}

int fprintf(FILE *restrict f, const char *restrict fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vfprintf(f, fmt, ap);
    va_end(ap);
    return r;
}

int vprintf(const char *restrict fmt, va_list ap)
{
    return vfprintf(stdout, fmt, ap);
}

int printf(const char *restrict fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vfprintf(stdout, fmt, ap);
    va_end(ap);
    return r;
}

size_t fwrite(const void *restrict p, size_t size, size_t n, FILE *restrict f)
{
    tl_put(f, p, size * n);
    return n;
}

int fputs(const char *restrict s, FILE *restrict f)
{
    tl_put(f, s, strlen(s));
    return 0;
}

int puts(const char *s)
{
    tl_put(stdout, s, strlen(s));
    tl_put(stdout, "\n", 1);
    return 0;
}

int fputc(int c, FILE *f)
{
    char ch = (char)c;
    tl_put(f, &ch, 1);
    return (unsigned char)c;
}

int putc(int c, FILE *f)
{
    return fputc(c, f);
}

int putchar(int c)
{
    return fputc(c, stdout);
}

void perror(const char *s)
{
    fprintf(stderr, "%s%serrno %d\n", s && *s ? s : "", s && *s ? ": " : "", tl_errno);
}

/* --------------------------------------------------------------------- exit */

void exit(int status)
{
    fflush(stdout);
    tl_exit_group(status);
}

void _exit(int status)
{
    tl_exit_group(status);
}

void abort(void)
{
    fflush(stdout);
    tl_exit_group(134); /* as a shell reports SIGABRT */
}
