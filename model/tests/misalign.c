/*
 * misalign - misaligned loads on sparc64 under the model: each one traps
 * (qemu-sparc64 delivers SIGBUS, as Linux does), and a SIGBUS handler skips
 * the faulting instruction (tpc = tnpc, tnpc += 4) and counts it.
 *
 *   misalign width=2|4|8 n=N
 *
 * Inside one region of interest: N loads of `width` bytes, each one byte
 * past an aligned address (lduh / lduw / ldx). Prints "traps=<handler
 * invocations>" (must equal N).
 * Build: sparc64-linux-gnu-gcc -O1 -static -mcpu=ultrasparc
 */
#include "trapline.h"
#include <signal.h>

static volatile unsigned long traps;

#if defined(__sparc__) && defined(__arch64__)
static void skip(int sig, siginfo_t *si, void *vctx)
{
    struct sigcontext *sc = vctx; /* sparc64: the handler's third argument */
    sc->sigc_regs.tpc = sc->sigc_regs.tnpc;
    sc->sigc_regs.tnpc += 4;
    traps++;
}
#endif

__attribute__((noinline)) static unsigned long loads(const unsigned char *p, int width, long n)
{
    unsigned long s = 0;
    TL_ROI_BEGIN();
    for (long i = 0; i < n; i++) {
        const unsigned char *q = p + 1 + 16 * (i & 7);
        TL_HIDE(q);
        if (width == 2)
            s += *(volatile const uint16_t *)q;
        else if (width == 4)
            s += *(volatile const uint32_t *)q;
        else
            s += *(volatile const uint64_t *)q;
    }
    TL_ROI_END();
    return s;
}

int main(int argc, char **argv)
{
    long n = 1000;
    int width = 4;
    for (int i = 1; i < argc; i++)
        if (sscanf(argv[i], "width=%d", &width) != 1 && sscanf(argv[i], "n=%ld", &n) != 1) {
            fprintf(stderr, "misalign: bad argument %s\n", argv[i]);
            return 2;
        }
#if defined(__sparc__) && defined(__arch64__)
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = skip;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
#endif
    static unsigned char buf[256] __attribute__((aligned(64)));
    unsigned long s = loads(buf, width, n);
    printf("width=%d n=%ld traps=%lu sum=%lu\n", width, n, traps, s);
    return 0;
}
