/* A static glibc program that makes the system calls a trapline kernel makes at start
 * and for its output, and prints what it got (tests/test_93_gem5_changes.py: it must run
 * to its exit in trapline's gem5, SPARC SE, with the values right). */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int main(void)
{
    struct timespec res, t0, t1;
    struct rusage ru;
    struct timeval tv;
    struct stat st;
    volatile unsigned long spin = 0;
    clock_getres(CLOCK_MONOTONIC, &res);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned long i = 0; i < 200000; i++)
        spin += i;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    int rus = getrusage(RUSAGE_SELF, &ru);
    int tod = gettimeofday(&tv, NULL);
    int fs = fstat(1, &st);
    long long dt = (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
    printf("res_ns=%ld elapsed_ns=%lld rusage=%d utime_s=%ld utime_us=%ld tod=%d tv_usec=%ld fstat=%d spin=%lu\n",
           res.tv_nsec, dt, rus, (long)ru.ru_utime.tv_sec, (long)ru.ru_utime.tv_usec, tod, (long)tv.tv_usec, fs,
           (unsigned long)spin);
    return 0;
}
