/* trapline guest check (x86_64, QEMU 2 vCPUs in 2 NUMA nodes): proves the guest sees
 * two NUMA nodes and that move_pages(2) can migrate a page between them
 * (CONFIG_NUMA + CONFIG_MIGRATION). Prints the online nodes and CPUs, the node of each
 * CPU, the node of a freshly touched page, then moves it to the other node and reads
 * its node back. Exit 0 if the page ended on the requested node. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MPOL_MF_MOVE (1 << 1)

static void show(const char *path)
{
	char line[256] = "";
	FILE *f = fopen(path, "r");

	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = '\0';
		fclose(f);
	}
	line[strcspn(line, "\n")] = '\0';
	printf("x86_64_numa: %s = %s\n", path, f ? line : "(missing)");
}

static long page_node(void *p)
{
	int status = -1;
	long r = syscall(SYS_move_pages, 0, 1UL, &p, NULL, &status, 0);

	return r < 0 ? r : status;
}

int main(void)
{
	long psz = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned cpu, node;
	int target, status = -1;
	void *pages[1];
	long r;

	show("/sys/devices/system/node/online");
	show("/sys/devices/system/cpu/online");
	for (int c = 0; c < 2; c++) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(c, &set);
		if (sched_setaffinity(0, sizeof(set), &set) == 0 && getcpu(&cpu, &node) == 0)
			printf("x86_64_numa: cpu %u is on node %u\n", cpu, node);
	}
	p[0] = 1; /* first touch, from cpu 1 (last affinity) */
	printf("x86_64_numa: page first touched on cpu 1 lives on node %ld\n", page_node(p));
	target = page_node(p) == 0 ? 1 : 0;
	pages[0] = p;
	r = syscall(SYS_move_pages, 0, 1UL, pages, &target, &status, MPOL_MF_MOVE);
	printf("x86_64_numa: move_pages(to node %d) = %ld, status %d; page now on node %ld -> %s\n",
	       target, r, status, page_node(p), page_node(p) == target ? "PASS" : "FAIL");
	return page_node(p) == target ? 0 : 1;
}
