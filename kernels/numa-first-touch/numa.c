/*
 * numa-first-touch - first-touch page placement, and binding a thread to a
 * CPU after its memory was touched elsewhere.
 *
 * From the method in shared/claims.md E5 (Darryl Gove, "NUMA, binding, and
 * OpenMP"): memory is placed on the node of the CPU that first touches it.
 * A process that allocates and touches its data before it is bound keeps
 * that data wherever the scheduler happened to run it; bound afterwards to
 * the same node it is fast, to the other node slow (all accesses remote):
 * a bimodal runtime. Binding before allocating removes the slow mode.
 *
 * Variants (key variant=, default all = each in turn):
 *   first-touch-local      bind to CPU A, allocate and touch, stay on A
 *   touch-then-bind-other  bind to A, allocate and touch, then bind to CPU
 *                          B on another node (all pages remote)
 *   bind-first             bind to B first, then allocate and touch
 *   bimodal                runs=R trials; in each the touching CPU is drawn
 *                          at random from all allowed CPUs (seed=, printed),
 *                          as the scheduler would place an unbound process,
 *                          then the thread binds to B: per trial the
 *                          fraction of pages local to B and the access time
 * "Touch" is building a random cyclic pointer chase through the first line of
 * every 128-byte pair of the buffer (size=, default 64 MiB), so every page is
 * written by the touching CPU. After binding, each sample walks the chase once
 * (pattern=chase: one dependent load per node, ns per access = latency) or
 * reads every line in order (pattern=stride). One node per pair, not per line:
 * an x86 core's adjacent-line prefetcher completes every line it fetches into
 * its L2 with the other line of the pair, and a chase through every line would
 * find a part of its lines fetched ahead (a measurement of latency then reads
 * less than the latency); the other line of a pair is no node.
 *
 * Placement is read back with move_pages(2) in query mode (nodes = NULL),
 * called through syscall() so the binary stays static without libnuma; the
 * CPU -> node map comes from /sys/devices/system/node/node<N>/cpulist,
 * limited to the CPUs this process may run on. Counts: pages_local,
 * pages_remote, pages_unknown (not present) and pages_total, where local
 * means on the node of the CPU that measures.
 *
 * With fewer than two nodes that have usable CPUs nothing here can be
 * measured: kind=info nodes=<n> and kind=skip reason=single_numa_node for
 * every requested variant, exit 0. No placement or latency is invented.
 *
 * The gem5 build (-DTL_GEM5, gem5_main below) runs in gem5's syscall-emulation
 * mode, which has no scheduler to bind with, no /sys topology and no
 * move_pages: there the main thread runs on core 0 and the one thread it
 * starts at a time on core 1, by construction (SE gives each thread a core of
 * its own, in creation order; trapline's board puts core i on node i).
 * "Bind to B" is "run in that thread", placement is read from gem5's
 * statistics at each node's memory (gem5_numa_pages_node*), the bimodal draw
 * (a scheduler's choice) is skipped, and the chase visits the nodes in a
 * fixed stride order (node k, k+S, k+2S, ... mod the node count, S prime
 * and more than a page of nodes apart, so that no prefetcher that stays in a
 * page finds it), whose SE mode refills TLB misses untimed: every step is one
 * dependent memory access as in the random chase, for a fraction of the
 * simulated instructions the random shuffle costs (gem5 simulates about 0.2
 * million instructions a second on its O3 CPU).
 */
#include "trapline.h"
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

TL_ARGS({"variant", "all", "[choice] all|first-touch-local|touch-then-bind-other|bind-first|bimodal"},
        {"threads", "2", "[int 2..2] threads at once: the main one and the measuring one (gem5 build: a core each)"},
        {"size", "67108864", "[int 4096..68719476736] buffer bytes (quick: 4194304)"},
        {"cpu", "-1", "[int -1..4095] CPU A, the touching CPU (-1: first usable CPU of the lowest node)"},
        {"target_cpu", "-1", "[int -1..4095] CPU B on another node (-1: first usable CPU of the next node)"},
        {"runs", "20", "[int 1..100000] bimodal: independent trials (quick: 4)"},
        {"seed", "1", "[int 0..4294967295] bimodal: seed for the random touching CPU of each trial"},
        {"pattern", "chase", "[choice] chase|stride (dependent random walk, or in-order read of every line)"});

static const char *all_variants[] = {"first-touch-local", "touch-then-bind-other", "bind-first", "bimodal", NULL};

#define LINE 64

/* ------------------------------------------------------------- topology */

struct topo {
    int node_of_cpu[CPU_SETSIZE]; /* -1: not usable by us */
    int nnodes;                   /* node directories found */
    int cpu_nodes;                /* nodes with at least one usable CPU */
    int ncpus;                    /* usable CPUs with a node */
    int cpus[CPU_SETSIZE];        /* those CPUs, ascending */
};

/* Parse a cpulist ("0-3,8,10-11") into node_of_cpu for CPUs in allowed. */
static int parse_cpulist(const char *s, int node, const cpu_set_t *allowed, struct topo *t)
{
    int added = 0;
    while (*s && *s != '\n') {
        char *end;
        long lo = strtol(s, &end, 10), hi = lo;
        if (end == s)
            break;
        if (*end == '-') {
            s = end + 1;
            hi = strtol(s, &end, 10);
        }
        for (long c = lo; c <= hi && c < CPU_SETSIZE; c++)
            if (c >= 0 && CPU_ISSET(c, allowed) && t->node_of_cpu[c] < 0) {
                t->node_of_cpu[c] = node;
                added++;
            }
        s = (*end == ',') ? end + 1 : end;
    }
    return added;
}

static void read_topology(struct topo *t, const cpu_set_t *allowed)
{
    memset(t, 0, sizeof *t);
    for (int c = 0; c < CPU_SETSIZE; c++)
        t->node_of_cpu[c] = -1;
    DIR *d = opendir("/sys/devices/system/node");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        int node;
        char tail;
        if (sscanf(e->d_name, "node%d%c", &node, &tail) != 1)
            continue;
        t->nnodes++;
        char path[300], buf[4096];
        snprintf(path, sizeof path, "/sys/devices/system/node/%s/cpulist", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(buf, sizeof buf, f) && parse_cpulist(buf, node, allowed, t) > 0)
            t->cpu_nodes++;
        fclose(f);
    }
    closedir(d);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (t->node_of_cpu[c] >= 0)
            t->cpus[t->ncpus++] = c;
}

static void bind_cpu(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s)) {
        fprintf(stderr, "%s: sched_setaffinity(cpu %d): %s\n", tl_exp, cpu, strerror(errno));
        exit(1);
    }
}

/* -------------------------------------------------------------- memory */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static char *alloc_buf(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "%s: mmap %zu bytes: %s\n", tl_exp, size, strerror(errno));
        exit(1);
    }
    return p;
}

/* The first touch: link the first line of every 128-byte pair into one
 * random cycle (Sattolo's shuffle), writing each from the CPU we are running
 * on (every page holds 32 of them). */
#define NODE (2 * LINE)
static void touch_chase(char *buf, size_t nnodes, uint64_t seed)
{
    uint32_t *perm = tl_malloc(nnodes * sizeof *perm);
    for (size_t i = 0; i < nnodes; i++)
        perm[i] = (uint32_t)i;
    for (size_t i = nnodes - 1; i > 0; i--) {
        size_t j = splitmix64(&seed) % i; /* j < i: a single cycle */
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < nnodes; i++)
        *(char **)(buf + (size_t)perm[i] * NODE) = buf + (size_t)perm[(i + 1) % nnodes] * NODE;
    free(perm);
}

/* Node of every page (move_pages query mode). Returns 0 or -errno. */
static int count_pages(char *buf, size_t size, int local_node, uint64_t *local, uint64_t *remote, uint64_t *unknown,
                       uint64_t *total)
{
    size_t ps = (size_t)sysconf(_SC_PAGESIZE), n = size / ps;
    void **pages = tl_malloc(n * sizeof *pages);
    int *status = tl_malloc(n * sizeof *status);
    for (size_t i = 0; i < n; i++)
        pages[i] = buf + i * ps;
    long r = syscall(SYS_move_pages, 0, (unsigned long)n, pages, NULL, status, 0);
    int err = r < 0 ? -errno : 0;
    *local = *remote = *unknown = 0;
    *total = n;
    for (size_t i = 0; !err && i < n; i++) {
        if (status[i] < 0)
            (*unknown)++;
        else if (status[i] == local_node)
            (*local)++;
        else
            (*remote)++;
    }
    free(pages);
    free(status);
    return err;
}

/* --------------------------------------------------------- measurement */

struct ctx {
    char *buf;
    size_t nlines;
    int stride;
    uintptr_t sink;
};

/* The measured loops, noinline and named. */
__attribute__((noinline)) static char *chase_walk(char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p = *(char **)p;
    return p;
}

__attribute__((noinline)) static uintptr_t stride_read(const char *buf, size_t nlines)
{
    uintptr_t s = 0;
    for (size_t i = 0; i < nlines; i++)
        s += *(const volatile uintptr_t *)(buf + i * LINE);
    return s;
}

static uint64_t body(void *vc)
{
    struct ctx *c = vc;
    if (c->stride) {
        c->sink += stride_read(c->buf, c->nlines);
        return c->nlines;
    }
    c->sink += (uintptr_t)chase_walk(c->buf, c->nlines * LINE / NODE);
    return c->nlines * LINE / NODE;
}

struct run {
    size_t size;
    int warmup, reps, stride;
    const char *pattern;
};

/* One placement experiment: bind to touch_cpu, allocate and touch, bind to
 * measure_cpu (if different), report placement and time the walk. */
static void experiment(const struct run *R, const struct topo *t, const char *variant, int touch_cpu, int measure_cpu,
                       uint64_t seed, const char *extra)
{
    bind_cpu(touch_cpu);
    char *buf = alloc_buf(R->size);
    size_t nlines = R->size / LINE;
    touch_chase(buf, nlines * LINE / NODE, seed);
    if (measure_cpu != touch_cpu)
        bind_cpu(measure_cpu);
    int on = sched_getcpu();

    int mnode = t->node_of_cpu[measure_cpu], tnode = t->node_of_cpu[touch_cpu];
    uint64_t local, remote, unknown, total;
    int err = count_pages(buf, R->size, mnode, &local, &remote, &unknown, &total);
    if (err) {
        char reason[64];
        snprintf(reason, sizeof reason, "move_pages_failed_errno_%d", -err);
        tl_skip(variant, reason);
        munmap(buf, R->size);
        return;
    }
    char params[256];
    snprintf(params, sizeof params,
             "size=%zu pattern=%s cpu=%d cpu_node=%d touch_cpu=%d touch_node=%d running_on=%d frac_local=%.3f%s%s",
             R->size, R->pattern, measure_cpu, mnode, touch_cpu, tnode, on, total ? (double)local / total : 0.0,
             *extra ? " " : "", extra);
    tl_count(variant, "pages_local", local, params);
    tl_count(variant, "pages_remote", remote, params);
    tl_count(variant, "pages_unknown", unknown, params);
    tl_count(variant, "pages_total", total, params);
    /* the outcome of this placement, summed over bimodal trials by the harness:
     * 1 when more than half the pages are on the measuring CPU's node */
    tl_count(variant, "mostly_local", total && 2 * local > total, params);
    tl_count(variant, "mostly_remote", total && 2 * remote > total, params);
    tl_count(variant, "placements", 1, params);

    struct ctx c = {.buf = buf, .nlines = nlines, .stride = R->stride};
    tl_measure(variant, params, R->warmup, R->reps, body, &c);
    TL_USE(c.sink);
    munmap(buf, R->size);
}

#if defined(TL_GEM5)
/* ------------------------------------------------------ the gem5 build */

#define STRIDE_NODES 4099 /* prime, more than a page (32 nodes) apart */

struct gem5_job {
    const struct run *R;
    const char *variant;
    char *buf;      /* NULL: allocate and touch it here */
    size_t nlines;
    int core;       /* where this runs: 0 the main thread, 1 the thread */
    int touch_core;
};

/* Link node k to node k+S (mod n; a node is the first line of a 128-byte pair,
 * NODE): one cycle through every node when S and n are coprime. Writes every
 * node (so every page) from the core this runs on. */
static void touch_stride(char *buf, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t next = k + STRIDE_NODES;
        if (next >= n)
            next -= n;
        *(char **)(buf + k * NODE) = buf + next * NODE;
        k = next;
    }
}

static void gem5_measure(struct gem5_job *j)
{
    if (!j->buf) {
        j->buf = alloc_buf(j->R->size);
        touch_stride(j->buf, j->nlines * LINE / NODE);
        j->touch_core = j->core;
    }
    char params[200];
    snprintf(params, sizeof params, "size=%zu pattern=%s cpu=%d cpu_node=%d touch_cpu=%d touch_node=%d placement=gem5",
             j->R->size, j->R->pattern, j->core, j->core, j->touch_core, j->touch_core);
    struct ctx c = {.buf = j->buf, .nlines = j->nlines, .stride = j->R->stride};
    tl_measure(j->variant, params, j->R->warmup, j->R->reps, body, &c);
    TL_USE(c.sink);
}

static void *gem5_thread(void *vj)
{
    gem5_measure(vj);
    return NULL;
}

/* Run j on core 1: a thread of its own, which gem5's SE mode gives the next core. */
static void on_core1(struct gem5_job *j)
{
    pthread_t th;
    j->core = 1;
    int e = pthread_create(&th, NULL, gem5_thread, j);
    if (e)
        tl_fail("pthread_create: %s (gem5 needs a second core: run_se.py --cores 2)", strerror(e));
    pthread_join(th, NULL);
}

static int gem5_main(const struct run *R, const char *const *list)
{
    size_t n = R->size / LINE;
    if (n * LINE / NODE % STRIDE_NODES == 0)
        tl_fail("size/128 must not be a multiple of %d", STRIDE_NODES);
    tl_header("nodes=2 cpu_nodes=2 usable_cpus=2 size=%zu pattern=%s placement=gem5", R->size, R->pattern);
    for (int i = 0; list[i]; i++) {
        const char *v = list[i];
        struct gem5_job j = {.R = R, .variant = v, .nlines = n};
        if (!strcmp(v, "first-touch-local")) {
            gem5_measure(&j);
        } else if (!strcmp(v, "touch-then-bind-other")) {
            j.buf = alloc_buf(R->size);
            touch_stride(j.buf, n * LINE / NODE);
            j.touch_core = 0;
            on_core1(&j);
        } else if (!strcmp(v, "bind-first")) {
            on_core1(&j);
        } else {
            tl_skip(v, "no_scheduler_in_gem5_se");
            continue;
        }
        munmap(j.buf, R->size);
    }
    return 0;
}
#endif

int main(int argc, char **argv)
{
    struct tl_opts o = tl_start("numa-first-touch", argc, argv, args);
    const char *variant = tl_choice(args, "variant", "all|first-touch-local|touch-then-bind-other|bind-first|bimodal");
    const char *pattern = tl_choice(args, "pattern", "chase|stride");
    struct run R = {.warmup = o.warmup, .reps = o.reps, .pattern = pattern, .stride = !strcmp(pattern, "stride")};
    long long size = tl_quick_int(args, "size", o.quick, 4 << 20);
    long runs = tl_quick_int(args, "runs", o.quick, 4);
    uint64_t seed = (uint64_t)tl_int(args, "seed");
    int cpu_a = tl_int(args, "cpu"), cpu_b = tl_int(args, "target_cpu");
    long ps = sysconf(_SC_PAGESIZE);
    if (size < ps || size % ps || size / LINE > UINT32_MAX || runs < 1)
        tl_fail("size must be a multiple of the page size (%ld), runs >= 1", ps);
    R.size = (size_t)size;

    const char *list[5] = {0};
    if (!strcmp(variant, "all"))
        memcpy(list, all_variants, sizeof all_variants);
    else
        list[0] = variant;
#if defined(TL_GEM5)
    return gem5_main(&R, list);
#endif

    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed)) {
        perror("sched_getaffinity");
        return 1;
    }
    static struct topo t;
    read_topology(&t, &allowed);

    tl_header("nodes=%d cpu_nodes=%d usable_cpus=%d size=%zu pattern=%s", t.nnodes, t.cpu_nodes, t.ncpus, R.size,
              pattern);
    if (t.cpu_nodes < 2) {
        for (int i = 0; list[i]; i++)
            tl_skip(list[i], "single_numa_node");
        return 0;
    }

    /* default CPUs: A = first CPU of the lowest node, B = first CPU of the
     * next node up */
    if (cpu_a < 0)
        cpu_a = t.cpus[0];
    if (cpu_b < 0)
        for (int i = 0; i < t.ncpus; i++)
            if (t.node_of_cpu[t.cpus[i]] != t.node_of_cpu[cpu_a]) {
                cpu_b = t.cpus[i];
                break;
            }
    if (cpu_a >= CPU_SETSIZE || cpu_b < 0 || cpu_b >= CPU_SETSIZE || t.node_of_cpu[cpu_a] < 0 ||
        t.node_of_cpu[cpu_b] < 0 || t.node_of_cpu[cpu_a] == t.node_of_cpu[cpu_b])
        tl_fail("cpu=%d and target_cpu=%d must be usable CPUs on two different nodes", cpu_a, cpu_b);
    tl_info("cpu=%d cpu_node=%d target_cpu=%d target_node=%d seed=%" PRIu64 " runs=%ld", cpu_a, t.node_of_cpu[cpu_a],
            cpu_b, t.node_of_cpu[cpu_b], seed, runs);

    /* move_pages may be missing (kernel without CONFIG_NUMA, some emulators) */
    {
        char *probe = alloc_buf((size_t)ps);
        probe[0] = 1;
        uint64_t l, r, u, n;
        int err = count_pages(probe, (size_t)ps, 0, &l, &r, &u, &n);
        munmap(probe, (size_t)ps);
        if (err) {
            tl_info("move_pages_errno=%d", -err);
            for (int i = 0; list[i]; i++)
                tl_skip(list[i], "move_pages_unavailable");
            return 0;
        }
    }

    for (int i = 0; list[i]; i++) {
        const char *v = list[i];
        if (!strcmp(v, "first-touch-local"))
            experiment(&R, &t, v, cpu_a, cpu_a, seed, "");
        else if (!strcmp(v, "touch-then-bind-other"))
            experiment(&R, &t, v, cpu_a, cpu_b, seed, "");
        else if (!strcmp(v, "bind-first"))
            experiment(&R, &t, v, cpu_b, cpu_b, seed, "");
        else {
            uint64_t rng = seed;
            for (long k = 0; k < runs; k++) {
                int pre = t.cpus[splitmix64(&rng) % (uint64_t)t.ncpus];
                char extra[64];
                snprintf(extra, sizeof extra, "trial=%ld seed=%" PRIu64, k, seed);
                experiment(&R, &t, v, pre, cpu_b, seed + (uint64_t)k, extra);
            }
        }
        sched_setaffinity(0, sizeof allowed, &allowed);
    }
    return 0;
}
