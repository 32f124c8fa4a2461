/*
 * workload - the benchmark guest of model/bench.sh: a memory-bound loop
 * (a streaming update of one array and gathers from another through an
 * index array) plus a tight arithmetic loop, sized by reps=<n>.
 * Prints the checksum and the number of loop iterations it ran.
 * Build: sparc64-linux-gnu-gcc -O1 -static -mcpu=ultrasparc workload.c
 * (model/bench.sh); model/bench-x86.sh builds the issue-11 x86_64/armv6
 * size with -DN=262144 -DSPIN=200000 (2^18 elements, a 200,000-step loop).
 */
#include <stdio.h>
#include <stdlib.h>

#ifndef N
#define N 32768 /* 3 arrays of 32768 x 4-8 bytes: about 640 KiB */
#endif
#ifndef SPIN
#define SPIN N /* steps of the arithmetic loop per rep */
#endif

static unsigned a[N];
static unsigned long b[N];
static unsigned idx[N];

__attribute__((noinline)) static unsigned long pass(void)
{
    unsigned long s = 0;
    for (unsigned i = 0; i < N; i++) {
        a[i] = a[i] * 3 + (unsigned)b[idx[i]];
        s += a[i];
    }
    return s;
}

__attribute__((noinline)) static unsigned long spin(unsigned long n)
{
    unsigned long x = 1;
    for (unsigned long i = 0; i < n; i++)
        x = x * 2862933555777941757ul + 3037000493ul;
    return x;
}

int main(int argc, char **argv)
{
    long reps = 100;
    for (int i = 1; i < argc; i++)
        if (sscanf(argv[i], "reps=%ld", &reps) != 1) {
            fprintf(stderr, "usage: workload [reps=N]\n");
            return 2;
        }
    unsigned r = 12345;
    for (unsigned i = 0; i < N; i++) {
        r = r * 1103515245u + 12345u;
        idx[i] = (r >> 8) % N;
        b[i] = i;
        a[i] = i;
    }
    unsigned long s = 0;
    for (long k = 0; k < reps; k++)
        s += pass() + spin(SPIN);
    printf("checksum=%lu iterations=%ld\n", s, reps * ((long)N + SPIN));
    return 0;
}
