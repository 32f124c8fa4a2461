/*
 * The C library calls of the sparc64 kernels, printed: tests/test_88_sparc_gem5.py
 * builds this once against glibc and once against kernels/common/tl_freestanding.c
 * and runs both under qemu-sparc64; their outputs must be identical. The cases
 * are the formats trapline.h and the sparc kernels use (%s %d %i %u %ld %lu
 * %lld %llu %x %#lx %zu %-12s %-10s %.*s PRIu64) and the flags, widths,
 * precisions and lengths around them, snprintf's truncation, and strtol/strtoll.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Through a volatile pointer gcc can neither check nor fold the calls. */
static const char *volatile null_str;
static const char *volatile word = "trapline";

#define P(...) printf("[" __VA_ARGS__), printf("]\n")

static void truncation(size_t n)
{
    char buf[16];
    memset(buf, '#', sizeof buf);
    int r = snprintf(n ? buf : NULL, n, "%s=%d", "depth", 1000);
    printf("snprintf n=%zu returns %d buf=%.*s\n", n, r, (int)(n ? sizeof buf : 0), buf);
}

static void parse(const char *s, int base)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, base);
    int e1 = errno;
    errno = 0;
    long w = strtol(s, NULL, base);
    int e2 = errno;
    printf("strtoll(\"%s\", %d) = %lld errno=%d end=+%ld strtol=%ld errno=%d\n", s, base, v, e1, (long)(end - s), w,
           e2);
}

int main(void)
{
    uint64_t u64 = 18446744073709551615ull;
    P("%s|%s|%-12s|%-10s|%12s|%.3s|%.*s|%.*s|%-*s|%*s", word, "", word, "ab", word, word, 4, word, 20, word, 10,
      word, -10, word);
    P("%s", null_str);
    P("%d|%i|%d|%d|%d|%5d|%-5d|%05d|%+d|% d|%+d|%.3d|%8.3d|%-8.3d|%08.3d|%.0d|%*d|%-*d", 0, -1, INT_MAX, INT_MIN, 42,
      42, 42, -42, 42, 42, -42, 7, 7, 7, 7, 0, 6, 9, -6, 9);
    P("%u|%u|%lu|%ld|%ld|%lld|%lld|%llu|%zu|%" PRIu64 "|%" PRIx64, 0u, UINT_MAX, ULONG_MAX, LONG_MIN, LONG_MAX,
      LLONG_MIN, LLONG_MAX, ULLONG_MAX, (size_t)4096, u64, u64);
    P("%x|%X|%#x|%#X|%#x|%#lx|%lx|%08x|%#010x|%o|%#o|%#o|%#.0o|%.0x", 255u, 255u, 255u, 255u, 0u, 0x2ab000ul,
      ULONG_MAX, 0xbeefu, 0xbeefu, 8u, 8u, 0u, 0u, 0u);
    P("%hd|%hu|%hhd|%hhu|%hx", 70000, 70000, 300, 300, 0x12345);
    P("%c|%c%c|%%|%5c|%-3c|", 'A', 'o', 'k', 'x', 'y');
    P("%p|%p", (void *)0x100a60, (void *)0);
    P("TL exp=%s kind=sample variant=%s rep=%d ops=%" PRIu64 " ns=%" PRIu64 "%s%s", "sparc-spill-fill", "recursion",
      2, (uint64_t)5000, (uint64_t)1650725, " ", "depth=1000 repeats=5");
    fprintf(stdout, "fprintf %s %ld\n", "stdout", -5L);
    puts("puts line");
    fputs("fputs line\n", stdout);
    putchar('c');
    fputc('\n', stdout);
    for (size_t n = 0; n < 16; n += 3)
        truncation(n);
    const char *nums[] = {"0", "42", "  -42", "+7", "0x1f", "0X1F", "010", "08", "12abc", "", "-", "0x", "0xg",
                          "9223372036854775807", "9223372036854775808", "-9223372036854775808",
                          "-9223372036854775809", "99999999999999999999999", "1000", "-0"};
    for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
        parse(nums[i], 0);
        parse(nums[i], 10);
        parse(nums[i], 16);
    }
    printf("atoi %d %d\n", atoi("123"), atoi("-77x"));
    return 0;
}
