/* trapline guest trap test (armv6, QEMU raspi0): proves that an unaligned LDRD in
 * user mode takes an alignment fault that the Linux kernel fixes up and counts.
 *
 *   armv6_ldrd [K]     (default K = 1000)
 *
 * Prints /proc/cpu/alignment, executes `ldrd r2, r3, [rX]` K times with rX at an odd
 * address (buf + 1), checks every loaded pair, prints /proc/cpu/alignment again, and
 * checks that the DWord counter rose by exactly K. Exit status 0 on success, 1 if
 * the counter did not rise by K or a value was wrong, 2 on a usage or I/O error.
 * Build: arm-linux-gnueabi-gcc -march=armv6 -marm -O2 -static. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int read_alignment(char *text, size_t size, unsigned long *dword)
{
	FILE *f = fopen("/proc/cpu/alignment", "r");
	size_t n;
	char *p;

	if (!f) {
		perror("/proc/cpu/alignment");
		return -1;
	}
	n = fread(text, 1, size - 1, f);
	fclose(f);
	text[n] = '\0';
	p = strstr(text, "DWord:");
	if (!p)
		return -1;
	*dword = strtoul(p + 6, NULL, 10);
	return 0;
}

/* noinline + volatile pointer: gcc cannot know the address is odd, and the asm
 * makes sure the instruction really is LDRD. */
static __attribute__((noinline)) unsigned long long ldrd_at(const unsigned char *p)
{
	unsigned long lo, hi;

	__asm__ volatile("ldrd r2, r3, [%2]\n\t"
			 "mov %0, r2\n\t"
			 "mov %1, r3"
			 : "=r"(lo), "=r"(hi)
			 : "r"(p)
			 : "r2", "r3", "memory");
	return ((unsigned long long)hi << 32) | lo;
}

int main(int argc, char **argv)
{
	static unsigned char buf[16] __attribute__((aligned(8)));
	unsigned char *volatile odd = buf + 1;
	const unsigned long long want = 0x0807060504030201ULL;
	char before[2048], after[2048];
	unsigned long long last = 0;
	unsigned long d0, d1, k = 1000, bad = 0;

	if (argc > 1)
		k = strtoul(argv[1], NULL, 0);
	if (k == 0) {
		fprintf(stderr, "usage: %s [K>0]\n", argv[0]);
		return 2;
	}
	for (int i = 0; i < 16; i++)
		buf[i] = i;
	if (read_alignment(before, sizeof(before), &d0) < 0)
		return 2;
	printf("--- /proc/cpu/alignment before\n%s", before);
	for (unsigned long i = 0; i < k; i++) {
		last = ldrd_at(odd);
		if (last != want)
			bad++;
	}
	if (read_alignment(after, sizeof(after), &d1) < 0)
		return 2;
	printf("--- /proc/cpu/alignment after\n%s", after);
	printf("armv6_ldrd: address %p, K=%lu unaligned LDRD, last value 0x%016llx (want "
	       "0x%016llx), wrong values %lu\n", (void *)odd, k, last, want, bad);
	printf("armv6_ldrd: DWord before=%lu after=%lu delta=%lu expected=%lu -> %s\n", d0, d1,
	       d1 - d0, k, (d1 - d0 == k && !bad) ? "PASS" : "FAIL");
	return (d1 - d0 == k && !bad) ? 0 : 1;
}
