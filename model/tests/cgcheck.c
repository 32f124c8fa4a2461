/*
 * cgcheck - a memory-heavy program for the cross-check of the model's L1D
 * against Valgrind's Cachegrind (tests/test_82_cachegrind.py): both run this
 * same static binary, and their L1 data misses over the whole run must agree.
 *
 *   cgcheck [work]      work = 0: startup and exit only (the noise floor)
 *
 * No region markers: the whole run is measured. The work is done on two
 * page-aligned static 512x512 int arrays (in .bss, so at the same virtual
 * addresses under both tools: the binary is static and not PIE), with aligned
 * 4-byte accesses only (no access straddles two lines; the two simulators
 * count a straddle differently) and no libc call (no IFUNC-selected
 * memset/memcpy, whose variant depends on the CPUID each tool presents):
 *   1. row-order fill of a (stores, one miss per line),
 *   2. column-order fill of a (stores 2 KiB apart: every one misses),
 *   3. transpose b = a^T (row-order loads, column-order stores),
 *   4. strided load walk over a (stride 33 ints, 16 passes),
 *   5. a cyclic load walk over 24 KiB of b, 24 times (fits some of the
 *      geometries of the test, thrashes the others),
 *   6. pseudo-random read-modify-writes (x86 `addl $1, mem`) in a 128 KiB
 *      window of b: mixed hits and misses that depend on the LRU order,
 *   7. conflict sweep: for strides of 1-32 KiB and k = 2..24 lines, 100
 *      cyclic passes over k lines one stride apart in a (with LRU, lines
 *      that share a set hit while they fit in its ways and all miss once
 *      they do not: the count depends on associativity and set count).
 * Output: "sum=<hex>\n" by write(2) (no stdio).
 * Build: gcc -O1 -static cgcheck.c
 */
#include <stdint.h>
#include <unistd.h>

#define N 512

static int a[N][N] __attribute__((aligned(4096)));
static int b[N][N] __attribute__((aligned(4096)));

#define BARRIER() __asm__ volatile("" ::: "memory")

__attribute__((noinline)) static void row_fill(int (*m)[N], int k)
{
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            m[i][j] = i + j + k;
}

__attribute__((noinline)) static void col_fill(int (*m)[N], int k)
{
    for (int j = 0; j < N; j++)
        for (int i = 0; i < N; i++)
            m[i][j] = i * k + j;
}

__attribute__((noinline)) static void transpose(int (*dst)[N], int (*src)[N])
{
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            dst[j][i] = src[i][j];
}

__attribute__((noinline)) static uint64_t strided(const int *p, long n, long stride, int passes)
{
    uint64_t s = 0;
    for (int r = 0; r < passes; r++)
        for (long i = r; i < n; i += stride)
            s += (unsigned)p[i];
    return s;
}

__attribute__((noinline)) static uint64_t cyclic(const int *p, long n, int passes)
{
    uint64_t s = 0;
    for (int r = 0; r < passes; r++)
        for (long i = 0; i < n; i += 4)
            s += (unsigned)p[i];
    return s;
}

__attribute__((noinline)) static uint64_t conflict_sweep(const int *p, int passes)
{
    uint64_t s = 0;
    for (int shift = 10; shift <= 15; shift++) {
        long stride = (1L << shift) / (long)sizeof(int);
        for (long k = 2; k <= 24; k++)
            for (int r = 0; r < passes; r++)
                for (long i = 0; i < k; i++)
                    s += (unsigned)p[i * stride];
    }
    return s;
}

__attribute__((noinline)) static void random_rmw(int *p, unsigned long n_ints, long n)
{
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (long i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        p[(x >> 33) & (n_ints - 1)] += 1;
    }
}

int main(int argc, char **argv)
{
    int work = !(argc > 1 && argv[1][0] == '0');
    uint64_t s = 0;
    if (work) {
        row_fill(a, 1);
        BARRIER();
        col_fill(a, 3);
        BARRIER();
        transpose(b, a);
        BARRIER();
        s += strided(&a[0][0], (long)N * N, 33, 16);
        s += cyclic(&b[0][0], 24 * 1024 / 4, 24);
        random_rmw(&b[0][0] + 8192, 128 * 1024 / 4, 200000);
        BARRIER();
        s += conflict_sweep(&a[0][0], 100);
        s += (unsigned)b[100][200] + (unsigned)b[N - 1][N - 1];
    }
    char out[32] = "sum=";
    int k = 4;
    for (int sh = 60; sh >= 0; sh -= 4)
        out[k++] = "0123456789abcdef"[(s >> sh) & 15];
    out[k++] = '\n';
    return write(1, out, k) == k ? 0 : 1;
}
