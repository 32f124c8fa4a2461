/*
 * features - one region of interest per modelled feature, for the model
 * test. Each region runs n=N instances of one thing:
 *   x86_64:  0 `lock add` in one line      1 `lock add` straddling two lines
 *            2 `xchg` with memory (implicitly locked)
 *            3 prefetchw through a register (address unknown to the model)
 *            4 prefetcht0 of a RIP-relative global (address known, mapped,
 *              its page in the DTLB)
 *            5 8-byte loads straddling two 64-byte lines
 *   sparc64: 0 prefetch [%g0 + 0], 22 (strong, unmapped address 0)
 *            1 prefetch [%g0 + 0], 2  (weak, address 0)
 *            2 prefetch [%o register], 22 (address unknown to the model)
 *            3 casx in one line (a locked read-modify-write)
 * Build: gcc -O1 -static / sparc64-linux-gnu-gcc -O1 -static -mcpu=ultrasparc
 */
#include "trapline.h"

static unsigned char buf[256] __attribute__((aligned(64)));
static volatile uint64_t global_line[8] __attribute__((aligned(64)));

int main(int argc, char **argv)
{
    long n = 1000;
    for (int i = 1; i < argc; i++)
        if (sscanf(argv[i], "n=%ld", &n) != 1) {
            fprintf(stderr, "features: bad argument %s\n", argv[i]);
            return 2;
        }
    unsigned char *p = buf;
    TL_HIDE(p);
#if defined(__x86_64__)
    uint64_t *inl = (uint64_t *)(p + 8), *split = (uint64_t *)(p + 60);
    TL_ROI_BEGIN();
    for (long i = 0; i < n; i++)
        __asm__ volatile("lock addq $1, %0" : "+m"(*inl));
    TL_ROI_END();
    TL_ROI_BEGIN();
    for (long i = 0; i < n; i++)
        __asm__ volatile("lock addq $1, %0" : "+m"(*split));
    TL_ROI_END();
    TL_ROI_BEGIN();
    for (long i = 0; i < n; i++) {
        uint64_t v = (uint64_t)i;
        __asm__ volatile("xchgq %0, %1" : "+r"(v), "+m"(*inl));
    }
    TL_ROI_END();
    TL_ROI_BEGIN();
    for (long i = 0; i < n; i++)
        __asm__ volatile("prefetchw (%0)" : : "r"(p));
    TL_ROI_END();
    uint64_t s = global_line[0]; /* its page is in the DTLB: the weak prefetch is not dropped */
    TL_ROI_BEGIN();
    for (long i = 0; i < n; i++)
        __asm__ volatile("prefetcht0 %0" : : "m"(global_line[0]));
    TL_ROI_END();
    TL_ROI_BEGIN();
    for (long i = 0; i < n; i++)
        s += *(volatile uint64_t *)(p + 124);
    TL_ROI_END();
    printf("inl=%lu split=%lu s=%lu\n", (unsigned long)*inl, (unsigned long)*split, (unsigned long)s);
#elif defined(__sparc__)
    TL_ROI_BEGIN();
    for (long i = 0; i < n; i++)
        __asm__ volatile("prefetch [%%g0 + 0], 22" ::: "memory");
    TL_ROI_END();
    TL_ROI_BEGIN();
    for (long i = 0; i < n; i++)
        __asm__ volatile("prefetch [%%g0 + 0], 2" ::: "memory");
    TL_ROI_END();
    TL_ROI_BEGIN();
    for (long i = 0; i < n; i++)
        __asm__ volatile("prefetch [%0], 22" : : "r"(p) : "memory");
    TL_ROI_END();
    uint64_t *w = (uint64_t *)(p + 8);
    TL_ROI_BEGIN();
    for (long i = 0; i < n; i++) {
        uint64_t old = *w, new = old + 1;
        __asm__ volatile("casx [%2], %3, %0" : "+r"(new), "+m"(*w) : "r"(w), "r"(old));
    }
    TL_ROI_END();
    printf("w=%lu\n", (unsigned long)*w);
#endif
    return 0;
}
