/*
 * Misaligned integer loads and stores of every size sparc64 has, one instruction
 * each (inline asm, so the compiler cannot split them), on a static glibc build:
 * tests/test_93_gem5_changes.py runs it on trapline's gem5 (change
 * sparc-unaligned-trap), where each one traps and the SE kernel completes it.
 * Prints key=value pairs (hex) for the test to check, and traps=N, the number of
 * misaligned instructions it executed.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static unsigned char buf[128] __attribute__((aligned(64)));

int main(void)
{
    unsigned char *p = buf + 1; /* misaligned for every size above one byte */
    uint64_t v, hi, lo;
    int traps = 0;

    for (int i = 0; i < 16; i++)
        buf[1 + i] = (unsigned char)(0x81 + i); /* 81 82 83 ... 90 from buf+1 */
    for (int i = 0; i < 4; i++)
        buf[62 + i] = (unsigned char)(0xa1 + i); /* a1 a2 a3 a4 across the 64-byte boundary */

    __asm__ volatile("lduh [%1], %0" : "=r"(v) : "r"(p) : "memory");
    printf("lduh=%llx ", (unsigned long long)v), traps++;
    __asm__ volatile("ldsh [%1], %0" : "=r"(v) : "r"(p) : "memory");
    printf("ldsh=%llx ", (unsigned long long)v), traps++;
    __asm__ volatile("lduw [%1], %0" : "=r"(v) : "r"(p) : "memory");
    printf("lduw=%llx ", (unsigned long long)v), traps++;
    __asm__ volatile("ldsw [%1], %0" : "=r"(v) : "r"(p) : "memory");
    printf("ldsw=%llx ", (unsigned long long)v), traps++;
    __asm__ volatile("ldx [%1], %0" : "=r"(v) : "r"(p) : "memory");
    printf("ldx=%llx ", (unsigned long long)v), traps++;
    /* the register + register address form */
    __asm__ volatile("lduw [%1 + %2], %0" : "=r"(v) : "r"(buf), "r"(3L) : "memory");
    printf("lduw_rr=%llx ", (unsigned long long)v), traps++;
    /* ldd: two words into an even/odd pair (needs 8-byte alignment) */
    __asm__ volatile("ldd [%2], %%o4\n\tmov %%o4, %0\n\tmov %%o5, %1" : "=r"(hi), "=r"(lo) : "r"(buf + 4)
                     : "o4", "o5", "memory");
    printf("ldd=%llx,%llx ", (unsigned long long)hi, (unsigned long long)lo), traps++;
    /* a misaligned load in a branch's delay slot: the kernel goes on at the branch target */
    __asm__ volatile("ba,pt %%xcc, 1f\n\t lduw [%1], %0\n\tmov 7, %0\n1:" : "=&r"(v) : "r"(p) : "memory");
    printf("delay=%llx ", (unsigned long long)v), traps++;
    /* across a cache line (32 or 64 bytes): the CPU would split it into pieces the TLB finds aligned */
    __asm__ volatile("lduw [%1], %0" : "=r"(v) : "r"(buf + 62) : "memory");
    printf("crossing=%llx ", (unsigned long long)v), traps++;

    memset(buf, 0, sizeof buf);
    __asm__ volatile("sth %0, [%1]" : : "r"(0x1122L), "r"(buf + 1) : "memory");
    traps++;
    __asm__ volatile("stw %0, [%1]" : : "r"(0x33445566L), "r"(buf + 5) : "memory");
    traps++;
    __asm__ volatile("stx %0, [%1]" : : "r"(0x778899aabbccddeeL), "r"(buf + 9) : "memory");
    traps++;
    __asm__ volatile("mov %0, %%o4\n\tmov %1, %%o5\n\tstd %%o4, [%2]" : : "r"(0x01020304L), "r"(0x05060708L),
                     "r"(buf + 20) : "o4", "o5", "memory");
    traps++;
    printf("stored=");
    for (int i = 0; i < 28; i++)
        printf("%02x", buf[i]);
    printf(" traps=%d\n", traps);
    return 0;
}
