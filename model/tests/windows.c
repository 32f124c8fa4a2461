/*
 * windows - register-window spill and fill traps, for the model test.
 *
 *   windows depth=N reps=R
 *
 * rec(N) recurses to depth N: N nested frames, each with a save (built with
 * -fno-shrink-wrap so every frame saves, even the deepest) and each using
 * its callee's result, so gcc cannot turn the recursion into a loop. One
 * descent runs before the region of interest (it leaves CANRESTORE = 0,
 * the steady state); the region holds R descents. With NWINDOWS register
 * windows, NWINDOWS - 2 saves are free, so each descent of depth
 * N >= NWINDOWS - 2 spills N - (NWINDOWS - 2) windows and the ascent fills
 * as many.
 * Build: sparc64-linux-gnu-gcc -O1 -fno-shrink-wrap -static -mcpu=ultrasparc
 */
#include "trapline.h"

__attribute__((noinline)) static long rec(long n)
{
    if (n <= 1)
        return 1;
    long r = rec(n - 1);
    __asm__ volatile("" : "+r"(r)); /* no tail recursion: r is used after the call */
    return r + 1;
}

int main(int argc, char **argv)
{
    long depth = 100, reps = 10;
    for (int i = 1; i < argc; i++)
        if (sscanf(argv[i], "depth=%ld", &depth) != 1 && sscanf(argv[i], "reps=%ld", &reps) != 1) {
            fprintf(stderr, "windows: bad argument %s\n", argv[i]);
            return 2;
        }
    long s = rec(depth);
    TL_ROI_BEGIN();
    for (long r = 0; r < reps; r++)
        s += rec(depth);
    TL_ROI_END();
    printf("depth=%ld reps=%ld sum=%ld\n", depth, reps, s);
    return s == depth * (reps + 1) ? 0 : 1;
}
