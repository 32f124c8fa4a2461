/* trapline guest trap test (sparc64, QEMU sun4u): proves that a misaligned LDUW in
 * user mode traps and that Linux/sparc64 does not fix it up but sends SIGBUS
 * (si_code BUS_ADRALN). This is why experiment E1's "kernel fixup" mode needs a
 * SIGBUS handler that emulates the load (or a kernel change) on Linux.
 *
 *   sparc64_lduw [K]       catch SIGBUS K times (default 10), print each; exit 0 if
 *                          all K loads trapped with BUS_ADRALN at the right address
 *   sparc64_lduw raw       one misaligned load with no handler: the process dies
 *                          of SIGBUS (init reports status=sig7)
 * Build: sparc64-linux-gnu-gcc -O2 -static. */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sigjmp_buf back;
static volatile sig_atomic_t hits;
static void *volatile fault_addr;
static volatile int fault_code;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	hits++;
	fault_addr = si->si_addr;
	fault_code = si->si_code;
	siglongjmp(back, 1);
}

static __attribute__((noinline)) unsigned int lduw_at(const unsigned char *p)
{
	unsigned int v;

	__asm__ volatile("lduw [%1], %0" : "=r"(v) : "r"(p) : "memory");
	return v;
}

int main(int argc, char **argv)
{
	static unsigned char buf[16] __attribute__((aligned(8)));
	unsigned char *volatile odd = buf + 1;
	struct sigaction sa;
	static unsigned long k = 10, ok; /* static: survive siglongjmp */

	for (int i = 0; i < 16; i++)
		buf[i] = i;
	printf("sparc64_lduw: aligned lduw at %p = 0x%08x\n", (void *)buf, lduw_at(buf));
	if (argc > 1 && strcmp(argv[1], "raw") == 0) {
		printf("sparc64_lduw: misaligned lduw at %p with no SIGBUS handler...\n",
		       (void *)odd);
		fflush(stdout);
		printf("sparc64_lduw: NOT TRAPPED, value 0x%08x\n", lduw_at(odd));
		return 1;
	}
	if (argc > 1)
		k = strtoul(argv[1], NULL, 0);

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigaction(SIGBUS, &sa, NULL);
	for (unsigned long i = 0; i < k; i++) {
		if (sigsetjmp(back, 1) == 0) {
			unsigned int v = lduw_at(odd);

			printf("sparc64_lduw: load %lu NOT TRAPPED, value 0x%08x\n", i, v);
		} else {
			int good = fault_code == BUS_ADRALN && fault_addr == (void *)odd;

			ok += good;
			if (i < 3 || i == k - 1)
				printf("sparc64_lduw: load %lu at %p got SIGBUS si_code=%d%s "
				       "si_addr=%p\n", i, (void *)odd, fault_code,
				       fault_code == BUS_ADRALN ? " (BUS_ADRALN)" : "",
				       fault_addr);
		}
	}
	printf("sparc64_lduw: %lu of %lu misaligned lduw got SIGBUS BUS_ADRALN -> %s\n", ok, k,
	       ok == k ? "PASS" : "FAIL");
	return ok == k ? 0 : 1;
}
