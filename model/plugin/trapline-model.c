/*
 * trapline-model.c - trapline's memory-system timing model, a QEMU TCG plugin.
 *
 * Built against the plugin API of the QEMU that trapline pins (Debian 12's
 * QEMU 7.2, plugin API version 1): see model/build.sh and docs/model.md.
 *
 *   qemu-x86_64 -plugin libtrapline-model.so,out=stats.json,l1d_size=32768,... ./prog
 *
 * The model watches what the guest executes and counts events: instruction
 * fetches through an L1I, data accesses through an L1D and a unified L2
 * (LRU), ITLB/DTLB and an optional second-level TLB, accesses that straddle
 * a line, unaligned accesses (done by hardware or trapped), locked
 * read-modify-write instructions (in one line, or split across two: a bus
 * lock), software prefetches (strong/weak), and SPARC register-window spill
 * and fill traps. Cycles = cpi * instructions + every penalty; they are
 * computed from the counts when the stats are printed, so the hot path only
 * counts. Everything is per vCPU (no lock on the access path); the output is
 * one JSON document with one entry per region of interest (the code between
 * two marker instructions, see TL_ROI_BEGIN/TL_ROI_END in
 * kernels/common/trapline.h), or one region for the whole run if the guest
 * executed no marker.
 *
 * Options are key=value (QEMU contrib/plugins style); an unknown key fails
 * with the list of valid ones. The option names are a contract with the
 * machine-description generator: see docs/model.md for their meaning.
 *
 * How the hot path is kept cheap:
 *  - one callback per executed translation block (not per instruction)
 *    counts its instructions and does its instruction fetches: the block's
 *    fetches are precomputed at translation time as runs of consecutive
 *    fetches from the same cache line (and page); a run is one L1I (ITLB)
 *    lookup plus (run length - 1) guaranteed hits;
 *  - one callback per data access (QEMU gives no address otherwise), which
 *    does the DTLB and L1D lookups, most-recently-used way first;
 *  - instruction exec callbacks only on the few instructions that need one
 *    (ROI markers, SPARC save/restore/return/flushw, prefetches);
 *  - all decoding (locked RMW, prefetch function codes, marker encodings,
 *    SPARC access widths) happens at translation time; translation-block
 *    descriptors are deduplicated by address and bytes, so retranslation
 *    does not grow memory; nothing is allocated on the execution path
 *    (except a region record when a marker executes).
 *
 * Traps that QEMU raises before an access happens (a misaligned SPARC load
 * never reaches the memory callback) are found by auditing each executed
 * block: on SPARC every load/store is decoded at translation time, and when
 * a block's next block starts while one of its decoded accesses has not
 * reported, that access faulted. In user mode that is an alignment trap (a
 * Linux/sparc64 process gets SIGBUS; its handler may emulate or skip the
 * access); the instructions after it in the block did not run and are taken
 * back off the count.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

#define MAX_VCPUS 1024
#define MAX_REGIONS 100000
#define MAX_NODES 8
#define INVALID_TAG UINT64_MAX

/* ------------------------------------------------------------ markers */
/*
 * Region-of-interest markers: one harmless instruction per architecture that
 * compilers never emit (keep in sync with kernels/common/trapline.h):
 *   x86_64   nopl 0x544c0001(%rax) / nopl 0x544c0002(%rax)
 *            0f 1f 80 01 00 4c 54 / 0f 1f 80 02 00 4c 54
 *            (a multi-byte NOP: no memory access, no flags; assemblers pad
 *            with displacement 0 only; 0x544c is "TL")
 *   sparc64  sethi 0x544c1, %g0 / sethi 0x544c2, %g0
 *            0x010544c1 / 0x010544c2 (a write to %g0 is discarded; the
 *            canonical nop is sethi 0, %g0)
 *   armv6    orr r11, r11, r11 / orr r12, r12, r12
 *            0xe18bb00b / 0xe18cc00c (unconditional, no flags)
 */
static const uint8_t X86_ROI_BEGIN[7] = {0x0f, 0x1f, 0x80, 0x01, 0x00, 0x4c, 0x54};
static const uint8_t X86_ROI_END[7] = {0x0f, 0x1f, 0x80, 0x02, 0x00, 0x4c, 0x54};
#define SPARC_ROI_BEGIN 0x010544c1u
#define SPARC_ROI_END 0x010544c2u
#define ARM_ROI_BEGIN 0xe18bb00bu
#define ARM_ROI_END 0xe18cc00cu

/* ------------------------------------------------------------ options */

enum arch { ARCH_X86_64, ARCH_SPARC64, ARCH_ARMV6 };
static const char *const arch_names[] = {"x86_64", "sparc64", "armv6"};

enum { POL_HW = 0, POL_TRAP = 1 };

typedef struct {
    enum arch arch;
    char *out;
    char *trace;
    double cpi;
    uint64_t l1i_size, l1i_assoc, l1i_line, l1i_lat;
    uint64_t l1d_size, l1d_assoc, l1d_line, l1d_lat;
    int l1d_wt; /* 0 = wb (write-back, write-allocate), 1 = wt (write-through, no-write-allocate) */
    uint64_t l2_size, l2_assoc, l2_line, l2_lat;
    uint64_t l3_size, l3_assoc, l3_line, l3_lat;
    uint64_t mem_lat;
    /* NUMA: nodes, latency matrix (cycles, [vCPU node][memory node]), the
     * bytes of guest-physical memory on each node (in order from address 0),
     * the node of each vCPU, and line interleaving (0 = off) */
    uint64_t numa_nodes;
    uint64_t numa_lat[MAX_NODES][MAX_NODES];
    uint64_t numa_mem[MAX_NODES];
    uint64_t numa_cpus[MAX_NODES * 8];
    unsigned n_numa_cpus;
    uint64_t numa_interleave;
    uint64_t itlb_entries, itlb_assoc, dtlb_entries, dtlb_assoc, page, tlb_miss;
    uint64_t stlb_entries, stlb_assoc, stlb_lat;
    int unaligned[9]; /* indexed by width 2, 4, 8 */
    double unaligned_penalty, straddle_penalty; /* cycles, may be fractional (measured averages) */
    uint64_t trap_cost;
    uint64_t lock_cost, split_lock_cost;
    int prefetch_strong; /* prefetch=strong: a strong prefetch that misses the TLB walks or traps */
    uint64_t prefetch_trap;
    uint64_t nwindows, window_trap;
    uint64_t trap_table; /* system mode, sparc64: the guest kernel's TL0 trap table (TBA), 0 = not given */
    uint64_t fast_forward; /* 1: model nothing until the first region marker (a guest's boot);
                            * 2: model only inside regions (between them, state is frozen) */
} Config;

static Config cfg;
static bool arch_given, nwindows_given, unaligned_given[9];

/* The contract: option names in the order they are documented. */
static const char *const option_names[] = {
    "arch", "out", "cpi",
    "l1i_size", "l1i_assoc", "l1i_line", "l1i_lat",
    "l1d_size", "l1d_assoc", "l1d_line", "l1d_lat", "l1d_write",
    "l2_size", "l2_assoc", "l2_line", "l2_lat",
    "l3_size", "l3_assoc", "l3_line", "l3_lat", "mem_lat",
    "numa_nodes", "numa_lat", "numa_mem", "numa_cpus", "numa_interleave",
    "itlb_entries", "itlb_assoc", "dtlb_entries", "dtlb_assoc", "page", "tlb_miss",
    "stlb_entries", "stlb_assoc", "stlb_lat",
    "unaligned2", "unaligned4", "unaligned8", "unaligned_penalty", "straddle_penalty",
    "trap_cost", "lock_cost", "split_lock_cost",
    "prefetch", "prefetch_trap", "nwindows", "window_trap", "trap_table", "fast_forward",
    "trace",
    NULL,
};

static void set_defaults(void)
{
    /* A generic machine; trapline passes every value from a machine file. */
    cfg.cpi = 1.0;
    cfg.l1i_size = 32768, cfg.l1i_assoc = 8, cfg.l1i_line = 64, cfg.l1i_lat = 4;
    cfg.l1d_size = 32768, cfg.l1d_assoc = 8, cfg.l1d_line = 64, cfg.l1d_lat = 4;
    cfg.l1d_wt = 0;
    cfg.l2_size = 1048576, cfg.l2_assoc = 16, cfg.l2_line = 64, cfg.l2_lat = 14;
    cfg.l3_size = 0, cfg.l3_assoc = 16, cfg.l3_line = 64, cfg.l3_lat = 40;
    cfg.mem_lat = 200;
    cfg.numa_nodes = 1, cfg.numa_interleave = 0;
    cfg.itlb_entries = 64, cfg.itlb_assoc = 8, cfg.dtlb_entries = 64, cfg.dtlb_assoc = 4;
    cfg.page = 4096, cfg.tlb_miss = 30;
    cfg.stlb_entries = 0, cfg.stlb_assoc = 0, cfg.stlb_lat = 0;
    cfg.unaligned[2] = cfg.unaligned[4] = cfg.unaligned[8] = POL_HW;
    cfg.unaligned_penalty = 0, cfg.straddle_penalty = 0;
    cfg.trap_cost = 1000, cfg.lock_cost = 20, cfg.split_lock_cost = 1000;
    cfg.prefetch_strong = 0, cfg.prefetch_trap = 1000;
    cfg.nwindows = 0, cfg.window_trap = 100;
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(msg, sizeof msg, "trapline-model: ");
    vsnprintf(msg + n, sizeof msg - n - 2, fmt, ap);
    va_end(ap);
    strcat(msg, "\n");
    /* QEMU 7.2 prints qemu_plugin_outs() only under -d plugin: say it on
     * stderr too, so that a refused option is never silent */
    qemu_plugin_outs(msg);
    fputs(msg, stderr);
    return -1;
}

static int parse_u64(const char *key, const char *val, uint64_t *out)
{
    char *end;
    if (!*val || *val == '-' || *val == '+')
        return fail("%s=%s is not a non-negative integer", key, val);
    errno = 0;
    unsigned long long v = strtoull(val, &end, 0);
    if (errno || *end)
        return fail("%s=%s is not a non-negative integer", key, val);
    *out = v;
    return 0;
}

static bool is_pow2(uint64_t x)
{
    return x && !(x & (x - 1));
}

static unsigned log2u(uint64_t x)
{
    return 63 - __builtin_clzll(x);
}

/* a colon-separated list of non-negative integers ("90:120:120:90") */
static unsigned numa_lat_n, numa_mem_n;
static int parse_list(const char *key, const char *val, uint64_t *out, unsigned max, unsigned *n)
{
    char buf[1024];
    if (strlen(val) >= sizeof buf)
        return fail("%s= is too long", key);
    strcpy(buf, val);
    *n = 0;
    for (char *tok = strtok(buf, ":"); tok; tok = strtok(NULL, ":")) {
        if (*n == max)
            return fail("%s=%s has more than %u values", key, val, max);
        if (parse_u64(key, tok, &out[(*n)++]))
            return -1;
    }
    if (!*n)
        return fail("%s= needs colon-separated integers, e.g. %s=90:120:120:90", key, key);
    return 0;
}

static int parse_option(const char *opt)
{
    const char *eq = strchr(opt, '=');
    char key[64];
    if (!eq || eq == opt || (size_t)(eq - opt) >= sizeof key) {
        char valid[1024] = "";
        for (const char *const *o = option_names; *o; o++)
            strcat(strcat(valid, " "), *o);
        return fail("argument '%s' is not key=value; valid keys:%s", opt, valid);
    }
    memcpy(key, opt, eq - opt);
    key[eq - opt] = 0;
    const char *val = eq + 1;

#define U64(name)                                  \
    if (!strcmp(key, #name))                       \
        return parse_u64(key, val, &cfg.name);
    U64(l1i_size) U64(l1i_assoc) U64(l1i_line) U64(l1i_lat)
    U64(l1d_size) U64(l1d_assoc) U64(l1d_line) U64(l1d_lat)
    U64(l2_size) U64(l2_assoc) U64(l2_line) U64(l2_lat) U64(mem_lat)
    U64(l3_size) U64(l3_assoc) U64(l3_line) U64(l3_lat) U64(numa_interleave)
    U64(itlb_entries) U64(itlb_assoc) U64(dtlb_entries) U64(dtlb_assoc) U64(page) U64(tlb_miss)
    U64(stlb_entries) U64(stlb_assoc) U64(stlb_lat)
    U64(trap_cost) U64(trap_table) U64(fast_forward)
    U64(lock_cost) U64(split_lock_cost) U64(prefetch_trap) U64(window_trap)
#undef U64
    if (!strcmp(key, "numa_nodes")) {
        if (parse_u64(key, val, &cfg.numa_nodes))
            return -1;
        if (cfg.numa_nodes < 1 || cfg.numa_nodes > MAX_NODES)
            return fail("numa_nodes=%s is not valid: 1 to %d nodes", val, MAX_NODES);
        return 0;
    }
    if (!strcmp(key, "numa_lat"))
        return parse_list(key, val, &cfg.numa_lat[0][0], MAX_NODES * MAX_NODES, &numa_lat_n);
    if (!strcmp(key, "numa_mem"))
        return parse_list(key, val, cfg.numa_mem, MAX_NODES, &numa_mem_n);
    if (!strcmp(key, "numa_cpus"))
        return parse_list(key, val, cfg.numa_cpus, MAX_NODES * 8, &cfg.n_numa_cpus);
    if (!strcmp(key, "nwindows")) {
        nwindows_given = true;
        return parse_u64(key, val, &cfg.nwindows);
    }
    if (!strcmp(key, "arch")) {
        for (int a = 0; a < 3; a++)
            if (!strcmp(val, arch_names[a])) {
                cfg.arch = a;
                arch_given = true;
                return 0;
            }
        return fail("arch=%s is not valid; choose one of: x86_64 sparc64 armv6", val);
    }
    if (!strcmp(key, "out")) {
        if (!*val)
            return fail("out= needs a file name");
        free(cfg.out);
        cfg.out = strdup(val);
        return 0;
    }
    if (!strcmp(key, "trace")) {
        if (!*val)
            return fail("trace= needs a file name");
        free(cfg.trace);
        cfg.trace = strdup(val);
        return 0;
    }
    if (!strcmp(key, "unaligned_penalty") || !strcmp(key, "straddle_penalty")) {
        char *end;
        errno = 0;
        double d = strtod(val, &end);
        if (errno || end == val || *end || !(d >= 0) || !isfinite(d))
            return fail("%s=%s is not a number of cycles of at least 0 (fractions allowed)", key, val);
        *(key[0] == 'u' ? &cfg.unaligned_penalty : &cfg.straddle_penalty) = d;
        return 0;
    }
    if (!strcmp(key, "cpi")) {
        char *end;
        errno = 0;
        double d = strtod(val, &end);
        if (errno || end == val || *end || !(d > 0) || !isfinite(d))
            return fail("cpi=%s is not a positive number (base cycles per instruction)", val);
        cfg.cpi = d;
        return 0;
    }
    if (!strcmp(key, "l1d_write")) {
        if (!strcmp(val, "wb"))
            cfg.l1d_wt = 0;
        else if (!strcmp(val, "wt"))
            cfg.l1d_wt = 1;
        else
            return fail("l1d_write=%s is not valid; choose one of: wb (write-back, write-allocate) "
                        "wt (write-through, no-write-allocate)", val);
        return 0;
    }
    if (!strcmp(key, "unaligned2") || !strcmp(key, "unaligned4") || !strcmp(key, "unaligned8")) {
        int w = key[9] - '0';
        unaligned_given[w] = true;
        if (!strcmp(val, "hw"))
            cfg.unaligned[w] = POL_HW;
        else if (!strcmp(val, "trap"))
            cfg.unaligned[w] = POL_TRAP;
        else
            return fail("%s=%s is not valid; choose one of: hw trap", key, val);
        return 0;
    }
    if (!strcmp(key, "prefetch")) {
        if (!strcmp(val, "strong"))
            cfg.prefetch_strong = 1;
        else if (!strcmp(val, "weak"))
            cfg.prefetch_strong = 0;
        else
            return fail("prefetch=%s is not valid; choose one of: strong weak", val);
        return 0;
    }
    char valid[1024] = "";
    for (const char *const *o = option_names; *o; o++)
        strcat(strcat(valid, " "), *o);
    return fail("unknown option '%s'; valid keys:%s", key, valid);
}

/* A cache or TLB geometry: size (or entries) / assoc (0 = fully associative)
 * / line (1 for a TLB). Rejects what cannot be built, naming the option. */
static int check_geometry(const char *size_key, uint64_t size, const char *assoc_key, uint64_t *assoc,
                          const char *line_key, uint64_t line, bool tlb)
{
    if (!tlb) {
        if (!is_pow2(line) || line < 4 || line > 65536)
            return fail("%s=%" PRIu64 " must be a power of two between 4 and 65536 bytes", line_key, line);
        /* the size need not be a power of two (the UltraSPARC T1's L2 is 3 MB,
         * 12-way): the number of sets must, checked below */
        if (size % line)
            return fail("%s=%" PRIu64 " is not a whole number of lines (%s=%" PRIu64 ")", size_key, size, line_key,
                        line);
        if (size < line)
            return fail("%s=%" PRIu64 " is smaller than one line (%s=%" PRIu64 ")", size_key, size, line_key,
                        line);
    } else if (size == 0) {
        return fail("%s=0: a TLB needs at least one entry", size_key);
    }
    uint64_t lines = size / line;
    if (*assoc == 0)
        *assoc = lines; /* fully associative */
    if (*assoc > lines)
        return fail("%s=%" PRIu64 " is smaller than one set (%s=%" PRIu64 " x %s %" PRIu64 ")", size_key, size,
                    assoc_key, *assoc, tlb ? "entry" : line_key, tlb ? 1 : line);
    if (lines % *assoc || !is_pow2(lines / *assoc))
        return fail("%s=%" PRIu64 " / %s=%" PRIu64 "%s does not give a power-of-two number of sets", size_key, size,
                    assoc_key, *assoc, tlb ? "" : " / line");
    if (*assoc > 4096)
        return fail("%s=%" PRIu64 " is more ways than this model supports (4096)", assoc_key, *assoc);
    return 0;
}

static int validate(void)
{
    if (check_geometry("l1i_size", cfg.l1i_size, "l1i_assoc", &cfg.l1i_assoc, "l1i_line", cfg.l1i_line, false) ||
        check_geometry("l1d_size", cfg.l1d_size, "l1d_assoc", &cfg.l1d_assoc, "l1d_line", cfg.l1d_line, false))
        return -1;
    if (cfg.l2_size) {
        if (check_geometry("l2_size", cfg.l2_size, "l2_assoc", &cfg.l2_assoc, "l2_line", cfg.l2_line, false))
            return -1;
        if (cfg.l2_line < cfg.l1d_line || cfg.l2_line < cfg.l1i_line)
            return fail("l2_line=%" PRIu64 " is smaller than an L1 line (l1i_line=%" PRIu64 ", l1d_line=%" PRIu64
                        "): line sizes may only grow towards memory", cfg.l2_line, cfg.l1i_line, cfg.l1d_line);
        if (cfg.l2_lat < cfg.l1i_lat || cfg.l2_lat < cfg.l1d_lat)
            return fail("l2_lat=%" PRIu64 " is below an L1 hit latency (l1i_lat, l1d_lat): latencies are "
                        "load-to-use cycles of a hit in that level", cfg.l2_lat);
        if (cfg.mem_lat < cfg.l2_lat)
            return fail("mem_lat=%" PRIu64 " is below l2_lat=%" PRIu64 ": latencies are load-to-use cycles",
                        cfg.mem_lat, cfg.l2_lat);
    } else if (cfg.mem_lat < cfg.l1i_lat || cfg.mem_lat < cfg.l1d_lat) {
        return fail("mem_lat=%" PRIu64 " is below an L1 hit latency (l1i_lat, l1d_lat)", cfg.mem_lat);
    }
    if (cfg.l3_size) {
        if (!cfg.l2_size)
            return fail("l3_size=%" PRIu64 " needs an L2 above it (l2_size=0)", cfg.l3_size);
        if (check_geometry("l3_size", cfg.l3_size, "l3_assoc", &cfg.l3_assoc, "l3_line", cfg.l3_line, false))
            return -1;
        if (cfg.l3_line < cfg.l2_line)
            return fail("l3_line=%" PRIu64 " is smaller than l2_line=%" PRIu64 ": line sizes may only grow towards "
                        "memory", cfg.l3_line, cfg.l2_line);
        if (cfg.l3_lat < cfg.l2_lat || cfg.mem_lat < cfg.l3_lat)
            return fail("l3_lat=%" PRIu64 " must lie between l2_lat=%" PRIu64 " and mem_lat=%" PRIu64
                        ": latencies are load-to-use cycles", cfg.l3_lat, cfg.l2_lat, cfg.mem_lat);
    }
    uint64_t n = cfg.numa_nodes;
    if (numa_lat_n == 0) { /* one latency for every node: mem_lat */
        for (uint64_t i = 0; i < n; i++)
            for (uint64_t j = 0; j < n; j++)
                cfg.numa_lat[i][j] = cfg.mem_lat;
    } else {
        if (numa_lat_n != n * n)
            return fail("numa_lat has %u values; numa_nodes=%" PRIu64 " needs %" PRIu64 " (row-major, [vCPU node]"
                        "[memory node], in cycles)", numa_lat_n, n, n * n);
        uint64_t flat[MAX_NODES * MAX_NODES];
        memcpy(flat, cfg.numa_lat, sizeof flat);
        for (uint64_t i = 0; i < n; i++)
            for (uint64_t j = 0; j < n; j++) {
                cfg.numa_lat[i][j] = flat[i * n + j];
                uint64_t above = cfg.l3_size ? cfg.l3_lat : cfg.l2_size ? cfg.l2_lat : cfg.l1d_lat;
                if (cfg.numa_lat[i][j] < above)
                    return fail("numa_lat[%" PRIu64 "][%" PRIu64 "]=%" PRIu64 " is below the last cache level's "
                                "latency (%" PRIu64 ")", i, j, cfg.numa_lat[i][j], above);
            }
    }
    if (numa_mem_n && numa_mem_n != n)
        return fail("numa_mem has %u values; numa_nodes=%" PRIu64 " needs one size in bytes per node", numa_mem_n, n);
    for (unsigned i = 0; i < cfg.n_numa_cpus; i++)
        if (cfg.numa_cpus[i] >= n)
            return fail("numa_cpus: vCPU %u is on node %" PRIu64 ", but numa_nodes=%" PRIu64, i, cfg.numa_cpus[i], n);
    if (cfg.numa_interleave && (!is_pow2(cfg.numa_interleave) || cfg.numa_interleave < 64))
        return fail("numa_interleave=%" PRIu64 " must be 0 (off) or a power of two of at least 64 bytes",
                    cfg.numa_interleave);
    if (!is_pow2(cfg.page) || cfg.page < 256 || cfg.page > (1ull << 30))
        return fail("page=%" PRIu64 " must be a power of two between 256 and 1073741824 bytes", cfg.page);
    if (cfg.page < cfg.l1d_line || cfg.page < cfg.l1i_line)
        return fail("page=%" PRIu64 " is smaller than an L1 line", cfg.page);
    if (check_geometry("itlb_entries", cfg.itlb_entries, "itlb_assoc", &cfg.itlb_assoc, NULL, 1, true) ||
        check_geometry("dtlb_entries", cfg.dtlb_entries, "dtlb_assoc", &cfg.dtlb_assoc, NULL, 1, true))
        return -1;
    if (cfg.stlb_entries) {
        if (check_geometry("stlb_entries", cfg.stlb_entries, "stlb_assoc", &cfg.stlb_assoc, NULL, 1, true))
            return -1;
    } /* stlb_entries=0: no second-level TLB; stlb_assoc and stlb_lat are unused */
    if (cfg.fast_forward > 2)
        return fail("fast_forward=%" PRIu64 " is not valid: 0 (model everything), 1 (nothing until the first "
                    "region marker) or 2 (only inside regions)", cfg.fast_forward);
    if (cfg.trap_table && (cfg.arch != ARCH_SPARC64 || (cfg.trap_table & 0x7fff)))
        return fail("trap_table=%" PRIu64 " is not valid: the address of a sparc64 guest kernel's trap table "
                    "(TBA: a multiple of 32768; arch=sparc64 only)", cfg.trap_table);
    if (cfg.arch == ARCH_SPARC64) {
        if (!nwindows_given)
            cfg.nwindows = 8;
        if (cfg.nwindows && (cfg.nwindows < 3 || cfg.nwindows > 32))
            return fail("nwindows=%" PRIu64 " is not valid: SPARC V9 has 3 to 32 register windows (0 = not "
                        "modelled)", cfg.nwindows);
        /* SPARC traps every misaligned access unless told otherwise */
        for (int w = 2; w <= 8; w *= 2)
            if (!unaligned_given[w])
                cfg.unaligned[w] = POL_TRAP;
    } else if (cfg.nwindows) {
        return fail("nwindows=%" PRIu64 " is only for arch=sparc64 (0 = not SPARC)", cfg.nwindows);
    }
    return 0;
}

/* ------------------------------------------------------------ counters */

/* Every counter is a uint64_t so that regions are differences of snapshots. */
typedef struct {
    uint64_t insns;
    uint64_t l1i_hits, l1i_misses, l1i_miss_l2hit;
    uint64_t l1d_load_hits, l1d_load_misses, l1d_store_hits, l1d_store_misses, l1d_writebacks;
    uint64_t l1d_rmiss_l2hit; /* L1D read misses (loads, wb store fills) served by an L2 hit */
    uint64_t l2_read_hits, l2_read_misses, l2_write_hits, l2_write_misses, l2_writebacks;
    uint64_t l1i_miss_l3hit, l1d_rmiss_l3hit; /* L1 misses served by an L3 hit */
    uint64_t l3_read_hits, l3_read_misses, l3_write_hits, l3_write_misses, l3_writebacks;
    uint64_t mem_reads[MAX_NODES]; /* reads that reached memory, by the node of the memory */
    uint64_t mem_writes[MAX_NODES]; /* writes that reached memory (dirty last-level victims, write-through
                                     * stores without an L2), by node: counted, not charged */
    uint64_t mem_cycles_i, mem_cycles_d; /* their latencies, numa_lat[vCPU node][memory node] */
    uint64_t io_accesses;          /* system mode: device accesses, not cached */
    uint64_t itlb_accesses, itlb_misses, dtlb_accesses, dtlb_misses, stlb_hits, stlb_misses;
    uint64_t loads, stores;
    uint64_t straddles, unaligned_hw, unaligned_trap;
    uint64_t locked_inline, locked_split;
    uint64_t pf_issued, pf_dropped, pf_trapped, pf_unknown;
    uint64_t win_spills, win_fills;
    uint64_t other_faults;
    uint64_t exceptions[8]; /* system mode: ARM entries by vector (0x00 reset .. 0x1c FIQ) / 4;
                             * sparc64 trap-table entries by kind (enum trap_kind) */
} Counters;

#define NCOUNTERS (sizeof(Counters) / sizeof(uint64_t))

static void counters_sub(Counters *r, const Counters *a, const Counters *b)
{
    const uint64_t *pa = (const uint64_t *)a, *pb = (const uint64_t *)b;
    uint64_t *pr = (uint64_t *)r;
    for (size_t i = 0; i < NCOUNTERS; i++)
        pr[i] = pa[i] - pb[i];
}

static void counters_add(Counters *r, const Counters *a)
{
    const uint64_t *pa = (const uint64_t *)a;
    uint64_t *pr = (uint64_t *)r;
    for (size_t i = 0; i < NCOUNTERS; i++)
        pr[i] += pa[i];
}

/* ------------------------------------------------------------ caches */

/*
 * A set-associative LRU array. Each set holds its ways in recency order
 * (way 0 = most recently used); an entry is (line << 1) | dirty, or
 * INVALID_TAG. The same structure serves the TLBs (key = page number).
 *
 * Policies (chosen to match pycachesim's, the oracle of the tests):
 *   read (load, instruction fetch, a write-back store's fill):
 *       hit  -> move to MRU;  miss -> fetch from below, insert at MRU,
 *       evict the LRU way (a dirty victim is written to the level below
 *       after the fetch);
 *   write into a write-back level (an L1 write-back, a write-through store
 *       arriving at the L2): hit -> mark dirty, recency unchanged;
 *       miss -> allocate as for a read, then mark dirty;
 *   write-through L1 store: hit or miss is counted, nothing changes in the
 *       L1, the bytes are written to the L2.
 */
typedef struct {
    uint64_t *e;
    uint64_t set_mask;
    unsigned ways;
    unsigned shift; /* line (or page) size, log2 */
} Array;

static void array_init(Array *a, uint64_t entries, uint64_t ways, unsigned shift)
{
    a->ways = (unsigned)ways;
    a->set_mask = entries / ways - 1;
    a->shift = shift;
    a->e = malloc(entries * sizeof(uint64_t));
    if (!a->e) {
        fprintf(stderr, "trapline-model: out of memory\n");
        abort();
    }
    for (uint64_t i = 0; i < entries; i++)
        a->e[i] = INVALID_TAG;
}

/* Read-style access of key k: returns 1 on a hit. On a miss, *victim is the
 * evicted entry (INVALID_TAG if none). */
static inline int array_read(Array *a, uint64_t k, uint64_t *victim)
{
    uint64_t *s = a->e + (k & a->set_mask) * a->ways;
    if (LIKELY((s[0] >> 1) == k))
        return 1;
    unsigned w = a->ways;
    for (unsigned i = 1; i < w; i++) {
        if ((s[i] >> 1) == k) {
            uint64_t t = s[i];
            for (unsigned j = i; j > 0; j--) /* short: inline beats a memmove call */
                s[j] = s[j - 1];
            s[0] = t;
            return 1;
        }
    }
    *victim = s[w - 1];
    for (unsigned j = w - 1; j > 0; j--)
        s[j] = s[j - 1];
    s[0] = k << 1;
    return 0;
}

/* Where key k sits, or NULL; no recency change. */
static inline uint64_t *array_find(Array *a, uint64_t k)
{
    uint64_t *s = a->e + (k & a->set_mask) * a->ways;
    for (unsigned i = 0; i < a->ways; i++)
        if ((s[i] >> 1) == k)
            return s + i;
    return NULL;
}

static inline uint64_t *array_mru(Array *a, uint64_t k)
{
    return a->e + (k & a->set_mask) * a->ways;
}

/* ------------------------------------------------------------ per vCPU */

typedef struct {
    Counters c;
    bool open;          /* inside a region */
    bool any_marker;    /* executed at least one marker */
    Counters snap;      /* counters when the open region began */
    Counters *regions;  /* closed regions */
    uint8_t *closed_by; /* 0 marker, 1 next begin, 2 exit */
    size_t n_regions, cap_regions;
    uint64_t *seq;      /* each closed region's place among all vCPUs' regions (begin order) */
    uint64_t open_seq;
    unsigned node;      /* the NUMA node of this vCPU */
    Counters overflow;  /* regions beyond MAX_REGIONS, summed */
    uint64_t n_overflow;
    uint64_t unmatched_ends;

    Array l1i, l1d, l2, l3, itlb, dtlb, stlb;

    /* SPARC register windows */
    uint64_t cansave, canrestore;

    /* progress audit (SPARC): the block executing now, how many of its
     * instructions are known to have completed, and a register-window
     * instruction that has started but is not yet known to have completed */
    const struct TBDesc *cur_tb;
    unsigned done;
    int pending;
    uint8_t pending_op;
} VCpu;

static VCpu *vcpus[MAX_VCPUS];
static pthread_mutex_t vcpu_lock = PTHREAD_MUTEX_INITIALIZER;

static bool have_l2, have_l3, have_stlb;
static uint64_t region_seq; /* regions begun so far, all vCPUs (atomic) */
/* System mode: caches are indexed by guest-physical address, except that
 * instruction fetches keep their virtual line (plugin API 1 gives no
 * physical address for a fetch); this bit keeps those lines apart from
 * data lines in the unified levels. */
#define ITAG (1ull << 62)
static uint64_t itag;
static const bool have_itlb = true, have_dtlb = true;
static unsigned l1i_shift, l1d_shift, l2_shift, l3_shift, page_shift;
static uint64_t l1d_line_mask;
static bool audit_faults;
static bool system_mode;
/* fast_forward=1: false until some vCPU begins a region; until then every
 * callback returns at once (no counts, no cache or TLB state: they start cold
 * at the first region) */
static bool modelling = true;
/* fast_forward=2: a vCPU models only while it has a region open; between
 * regions its callbacks return at once and its caches and TLBs keep the state
 * the last region left */
static bool regions_only;
static const char *target_name = "";

static FILE *trace_fp;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;

static void vcpu_init(qemu_plugin_id_t id, unsigned int vi)
{
    if (vi >= MAX_VCPUS) {
        fprintf(stderr, "trapline-model: vCPU index %u beyond the model's limit (%d)\n", vi, MAX_VCPUS);
        abort();
    }
    pthread_mutex_lock(&vcpu_lock);
    if (!vcpus[vi]) { /* a reused index (user-mode thread) keeps its state */
        VCpu *v = calloc(1, sizeof *v);
        array_init(&v->l1i, cfg.l1i_size / cfg.l1i_line, cfg.l1i_assoc, l1i_shift);
        array_init(&v->l1d, cfg.l1d_size / cfg.l1d_line, cfg.l1d_assoc, l1d_shift);
        if (have_l2)
            array_init(&v->l2, cfg.l2_size / cfg.l2_line, cfg.l2_assoc, l2_shift);
        if (have_l3)
            array_init(&v->l3, cfg.l3_size / cfg.l3_line, cfg.l3_assoc, l3_shift);
        v->node = vi < cfg.n_numa_cpus ? (unsigned)cfg.numa_cpus[vi] : vi % (unsigned)cfg.numa_nodes;
        array_init(&v->itlb, cfg.itlb_entries, cfg.itlb_assoc, page_shift);
        array_init(&v->dtlb, cfg.dtlb_entries, cfg.dtlb_assoc, page_shift);
        if (have_stlb)
            array_init(&v->stlb, cfg.stlb_entries, cfg.stlb_assoc, page_shift);
        v->cansave = cfg.nwindows ? cfg.nwindows - 2 : 0;
        v->canrestore = 0;
        v->pending = -1;
        __atomic_store_n(&vcpus[vi], v, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&vcpu_lock);
}

/* ------------------------------------------------------------ the model */

/* The NUMA node holding addr (a guest-physical address in system mode). */
static inline unsigned node_of(const VCpu *v, uint64_t addr)
{
    if (cfg.numa_nodes == 1)
        return 0;
    if (addr & itag) /* an instruction fetch in system mode: taken as local */
        return v->node;
    if (cfg.numa_interleave)
        return (unsigned)((addr / cfg.numa_interleave) % cfg.numa_nodes);
    if (!system_mode || !numa_mem_n) /* user mode: the vCPU's own memory */
        return v->node;
    uint64_t end = 0;
    for (unsigned k = 0; k < cfg.numa_nodes; k++) {
        end += cfg.numa_mem[k];
        if (addr < end)
            return k;
    }
    return v->node; /* above the memory described (not RAM) */
}

/* A read that reached memory: charged numa_lat[vCPU node][memory node]. */
static inline void mem_read(VCpu *v, uint64_t addr, bool ifetch)
{
    unsigned k = node_of(v, addr);
    v->c.mem_reads[k]++;
    if (ifetch)
        v->c.mem_cycles_i += cfg.numa_lat[v->node][k];
    else
        v->c.mem_cycles_d += cfg.numa_lat[v->node][k];
}

/* A write that reached memory (a dirty victim of the last level, or a
 * write-through store without an L2): counted by node, never waited for. */
static inline void mem_write(VCpu *v, uint64_t addr)
{
    v->c.mem_writes[node_of(v, addr)]++;
}

/* A write into the last level (hit: dirty, recency unchanged; miss:
 * allocate, dirty); returns the dirty victim (or INVALID_TAG). */
static inline uint64_t lower_write(Array *a, uint64_t k, uint64_t *hits, uint64_t *misses)
{
    uint64_t *p = array_find(a, k);
    if (p) {
        *p |= 1;
        (*hits)++;
        return INVALID_TAG;
    }
    uint64_t victim = INVALID_TAG;
    array_read(a, k, &victim);
    array_mru(a, k)[0] |= 1;
    (*misses)++;
    return victim != INVALID_TAG && (victim & 1) ? victim : INVALID_TAG;
}

static inline void l3_write(VCpu *v, uint64_t addr)
{
    uint64_t victim = lower_write(&v->l3, addr >> l3_shift, &v->c.l3_write_hits, &v->c.l3_write_misses);
    if (victim != INVALID_TAG) {
        v->c.l3_writebacks++;
        mem_write(v, (victim >> 1) << l3_shift);
    }
}

/* An L3 read (an L2 miss, or the fill of an L2 write-allocate): 1 on a hit. */
static inline int l3_read(VCpu *v, uint64_t addr)
{
    uint64_t victim = INVALID_TAG;
    if (array_read(&v->l3, addr >> l3_shift, &victim)) {
        v->c.l3_read_hits++;
        return 1;
    }
    v->c.l3_read_misses++;
    if (victim != INVALID_TAG && (victim & 1)) {
        v->c.l3_writebacks++;
        mem_write(v, (victim >> 1) << l3_shift);
    }
    return 0;
}

/* An L2 victim: a dirty one is written to the L3, or to memory. */
static inline void l2_evicted(VCpu *v, uint64_t victim)
{
    if (victim == INVALID_TAG || !(victim & 1))
        return;
    v->c.l2_writebacks++;
    if (have_l3)
        l3_write(v, (victim >> 1) << l2_shift);
    else
        mem_write(v, (victim >> 1) << l2_shift);
}

/* A write into the L2 (an L1 write-back, or a write-through store): a miss
 * allocates the line, filled from the L3 (not charged: no load waits for
 * it), and then writes the L2's dirty victim to the L3. */
static inline void l2_write(VCpu *v, uint64_t addr)
{
    uint64_t k = addr >> l2_shift;
    uint64_t *p = array_find(&v->l2, k);
    if (p) {
        *p |= 1;
        v->c.l2_write_hits++;
        return;
    }
    uint64_t victim = INVALID_TAG;
    array_read(&v->l2, k, &victim);
    array_mru(&v->l2, k)[0] |= 1;
    v->c.l2_write_misses++;
    if (have_l3)
        l3_read(v, addr);
    l2_evicted(v, victim);
}

/* A read below the L1s (an L1 miss of the line at addr): returns the level
 * that served it, 2 (L2), 3 (L3) or 0 (memory). A dirty victim is written
 * to the level below after the fill (pycachesim's order). */
static inline int lower_read(VCpu *v, uint64_t addr, bool ifetch)
{
    uint64_t victim = INVALID_TAG;
    if (!have_l2) {
        mem_read(v, addr, ifetch);
        return 0;
    }
    if (array_read(&v->l2, addr >> l2_shift, &victim)) {
        v->c.l2_read_hits++;
        return 2;
    }
    v->c.l2_read_misses++;
    int lvl = 0;
    if (have_l3 && l3_read(v, addr))
        lvl = 3;
    else
        mem_read(v, addr, ifetch);
    l2_evicted(v, victim);
    return lvl;
}

static inline void tlb_access(VCpu *v, Array *t, uint64_t vpn, uint64_t *miss)
{
    uint64_t victim;
    if (LIKELY(array_read(t, vpn, &victim)))
        return;
    (*miss)++;
    if (have_stlb) {
        if (array_read(&v->stlb, vpn, &victim))
            v->c.stlb_hits++;
        else
            v->c.stlb_misses++;
    }
}

/* An L1D read of one line (a load, or the fill of a write-back store).
 * Returns 1 on a hit. */
static inline int l1d_read(VCpu *v, uint64_t line)
{
    uint64_t victim = INVALID_TAG;
    if (LIKELY(array_read(&v->l1d, line, &victim)))
        return 1;
    int lvl = lower_read(v, line << l1d_shift, false);
    if (lvl == 2)
        v->c.l1d_rmiss_l2hit++;
    else if (lvl == 3)
        v->c.l1d_rmiss_l3hit++;
    if (victim != INVALID_TAG && (victim & 1)) {
        v->c.l1d_writebacks++;
        if (have_l2)
            l2_write(v, (victim >> 1) << l1d_shift);
        else
            mem_write(v, (victim >> 1) << l1d_shift);
    }
    return 0;
}

static inline void l1i_fetch_line(VCpu *v, uint64_t line)
{
    uint64_t victim = INVALID_TAG;
    if (LIKELY(array_read(&v->l1i, line, &victim))) {
        v->c.l1i_hits++;
        return;
    }
    v->c.l1i_misses++;
    int lvl = lower_read(v, (line << l1i_shift) | itag, true);
    if (lvl == 2)
        v->c.l1i_miss_l2hit++;
    else if (lvl == 3)
        v->c.l1i_miss_l3hit++;
}

static void trace_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void trace_line(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&trace_lock);
    vfprintf(trace_fp, fmt, ap);
    pthread_mutex_unlock(&trace_lock);
    va_end(ap);
}

/* One data access of size bytes at vaddr (guest-physical paddr: the caches'
 * index in system mode; paddr == vaddr in user mode). */
static inline void data_access(VCpu *v, uint64_t vaddr, uint64_t paddr, unsigned size, bool store, bool locked,
                               bool load_part)
{
    uint64_t last = vaddr + size - 1;

    if (have_dtlb) {
        uint64_t p0 = vaddr >> page_shift, p1 = last >> page_shift;
        v->c.dtlb_accesses++;
        tlb_access(v, &v->dtlb, p0, &v->c.dtlb_misses);
        if (UNLIKELY(p1 != p0)) {
            v->c.dtlb_accesses++;
            tlb_access(v, &v->dtlb, p1, &v->c.dtlb_misses);
        }
    }
    if (UNLIKELY(size > 1 && (vaddr & (size - 1)))) {
        int w = size > 8 ? 8 : (int)size;
        if (cfg.unaligned[w] == POL_TRAP)
            v->c.unaligned_trap++;
        else
            v->c.unaligned_hw++;
    }
    uint64_t l0 = paddr >> l1d_shift, l1 = (paddr + size - 1) >> l1d_shift;
    bool straddle = (vaddr >> l1d_shift) != (last >> l1d_shift);
    if (UNLIKELY(straddle))
        v->c.straddles++;
    if (UNLIKELY(locked) && load_part) {
        if (straddle)
            v->c.locked_split++;
        else
            v->c.locked_inline++;
    }
    if (!store) {
        v->c.loads++;
        for (uint64_t l = l0; l <= l1; l++) {
            if (l1d_read(v, l))
                v->c.l1d_load_hits++;
            else
                v->c.l1d_load_misses++;
        }
        return;
    }
    v->c.stores++;
    if (!cfg.l1d_wt) {
        /* write-back, write-allocate: read for ownership, then write */
        for (uint64_t l = l0; l <= l1; l++) {
            if (l1d_read(v, l))
                v->c.l1d_store_hits++;
            else
                v->c.l1d_store_misses++;
        }
        if (LIKELY(!straddle)) {
            array_mru(&v->l1d, l0)[0] |= 1;
            return;
        }
        for (uint64_t l = l0; l <= l1; l++) {
            uint64_t *p = array_find(&v->l1d, l);
            if (!p) { /* evicted by its neighbour (tiny caches only) */
                l1d_read(v, l);
                v->c.l1d_store_misses++;
                p = array_mru(&v->l1d, l);
            }
            *p |= 1;
        }
        return;
    }
    /* write-through, no-write-allocate */
    for (uint64_t l = l0; l <= l1; l++) {
        if (array_find(&v->l1d, l))
            v->c.l1d_store_hits++;
        else
            v->c.l1d_store_misses++;
        if (have_l2)
            l2_write(v, l << l1d_shift);
        else
            mem_write(v, l << l1d_shift);
    }
}

/* ------------------------------------------------------------ decode */

enum special {
    SP_NONE = 0,
    SP_ROI_BEGIN,
    SP_ROI_END,
    SP_SAVE,
    SP_RESTORE,
    SP_FLUSHW,
    SP_PREFETCH,
    SP_PROGRESS, /* the instruction after a window instruction: it completed */
    SP_EXCEPTION, /* system mode: the first instruction of an ARM exception vector or a SPARC trap-table
                   * entry; its kind is InsnDesc.entry */
};

/* sparc64 trap-table entries, by kind (SPARC V9 table 7-1 trap types) */
enum trap_kind { TK_UNALIGNED, TK_SPILL, TK_FILL, TK_CLEAN_WINDOW, TK_MMU_MISS, TK_TRAP_INSN, TK_INTERRUPT, TK_OTHER };
static const char *const trap_kind_name[] = {"unaligned", "spill", "fill", "clean_window", "mmu_miss",
                                             "trap_instruction", "interrupt", "other"};

/* The kind of the trap whose entry is slot tt of the table, or -1 for a slot
 * that is the continuation of the entry before it: clean_window (0x024), the
 * MMU miss and protection handlers (0x064-0x06f) and the spill and fill
 * handlers (0x080-0x0ff) take four slots each, so only every fourth slot is
 * an entry (SPARC V9 7.7, table 7-1). */
static int sparc_trap_kind(unsigned tt)
{
    if ((tt >= 0x024 && tt <= 0x027) || (tt >= 0x064 && tt <= 0x06f) || (tt >= 0x080 && tt <= 0x0ff)) {
        if (tt & 3)
            return -1;
        return tt >= 0x0c0 ? TK_FILL : tt >= 0x080 ? TK_SPILL : tt >= 0x064 ? TK_MMU_MISS : TK_CLEAN_WINDOW;
    }
    if (tt >= 0x034 && tt <= 0x036) /* mem_address_not_aligned, LDDF_, STDF_ */
        return TK_UNALIGNED;
    if (tt >= 0x100 && tt <= 0x17f) /* Tcc: trap instructions (Linux system calls) */
        return TK_TRAP_INSN;
    if ((tt >= 0x041 && tt <= 0x04f) || tt == 0x060) /* interrupt_level_n, interrupt_vector */
        return TK_INTERRUPT;
    return TK_OTHER;
}

struct TBDesc;

typedef struct InsnDesc {
    const struct TBDesc *tb;
    uint8_t special;
    uint8_t locked;
    uint8_t width;      /* SPARC: decoded access width (audited accesses) */
    uint8_t pf_strong;  /* prefetch: the instruction asks for a strong prefetch */
    uint8_t pf_known;   /* prefetch: address known at translation time */
    uint8_t tail;       /* counted and fetched by its own exec callback (see build_desc) */
    uint8_t entry;      /* SP_EXCEPTION: ARM vector / 4, or sparc64 enum trap_kind */
    uint16_t idx;       /* index in the block */
    uint16_t n_after;   /* instructions after this one counted at block entry */
    uint64_t pf_addr;
} InsnDesc;

typedef struct {
    uint64_t key; /* line or page number */
    uint32_t count;
} Run;

typedef struct TBDesc {
    struct TBDesc *next;
    uint64_t vaddr;
    uint32_t n_insns, n_bytes;
    uint32_t n_entry; /* instructions counted (and fetched) at block entry */
    uint32_t n_irun, n_prun;
    uint32_t n_audit;
    int last_audit; /* index of the last audited access, -1 if none */
    uint8_t *bytes;
    uint16_t *audit_idx; /* instruction index of each audited access */
    Run *irun, *prun;
    InsnDesc *insn;
    uint64_t *ivaddr; /* for the trace */
    uint8_t *isize;
} TBDesc;

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

static void decode_x86(InsnDesc *d, const uint8_t *b, size_t n, uint64_t vaddr)
{
    if (n == sizeof X86_ROI_BEGIN && !memcmp(b, X86_ROI_BEGIN, n)) {
        d->special = SP_ROI_BEGIN;
        return;
    }
    if (n == sizeof X86_ROI_END && !memcmp(b, X86_ROI_END, n)) {
        d->special = SP_ROI_END;
        return;
    }
    size_t i = 0;
    bool lock = false;
    for (; i < n; i++) {
        uint8_t p = b[i];
        if (p == 0xf0)
            lock = true;
        else if (!(p == 0xf2 || p == 0xf3 || p == 0x2e || p == 0x36 || p == 0x3e || p == 0x26 || p == 0x64 ||
                   p == 0x65 || p == 0x66 || p == 0x67))
            break;
    }
    if (i < n && (b[i] & 0xf0) == 0x40) /* REX */
        i++;
    if (i >= n)
        return;
    uint8_t op = b[i];
    if ((op == 0x86 || op == 0x87) && i + 1 < n && (b[i + 1] >> 6) != 3)
        lock = true; /* xchg with memory is implicitly locked */
    d->locked = lock;
    if (op == 0x0f && i + 2 < n && (b[i + 1] == 0x18 || b[i + 1] == 0x0d)) {
        uint8_t modrm = b[i + 2];
        unsigned mod = modrm >> 6, reg = (modrm >> 3) & 7, rm = modrm & 7;
        if (mod == 3 || (b[i + 1] == 0x18 && reg > 3))
            return; /* a hint NOP, not a prefetch */
        d->special = SP_PREFETCH;
        d->pf_strong = 0; /* x86 prefetches never fault: always weak */
        if (mod == 0 && rm == 5 && i + 7 <= n) { /* RIP-relative */
            int32_t disp = (int32_t)le32(b + i + 3);
            d->pf_known = 1;
            d->pf_addr = vaddr + n + (int64_t)disp;
        } else if (mod == 0 && rm == 4 && i + 8 <= n && (b[i + 3] & 7) == 5 && ((b[i + 3] >> 3) & 7) == 4) {
            /* SIB, no base, no index: absolute disp32 (REX.X would name r12 as index) */
            bool rex_x = i > 0 && (b[i - 1] & 0xf0) == 0x40 && (b[i - 1] & 2);
            if (!rex_x) {
                d->pf_known = 1;
                d->pf_addr = (uint64_t)(int64_t)(int32_t)le32(b + i + 4);
            }
        }
    }
}

/* SPARC V9 format-3 access width by op3, 0 = not a plain access we audit. */
static unsigned sparc_width(unsigned op3, unsigned rd)
{
    switch (op3) {
    case 0x01: case 0x05: case 0x09: case 0x0d: return 1;           /* ldub stb ldsb ldstub */
    case 0x02: case 0x06: case 0x0a: return 2;                      /* lduh sth ldsh */
    case 0x00: case 0x04: case 0x08: case 0x0f: case 0x20: case 0x24: return 4; /* lduw stw ldsw swap ldf stf */
    case 0x03: case 0x07: case 0x0b: case 0x0e: case 0x23: case 0x27: return 8; /* ldd std ldx stx lddf stdf */
    case 0x21: case 0x25: return rd == 1 ? 8 : 4;                   /* ld(x)fsr st(x)fsr */
    case 0x22: case 0x26: return 16;                                /* ldqf stqf */
    default: return 0; /* alternate-space, prefetch, cas: not audited */
    }
}

static void decode_sparc(InsnDesc *d, const uint8_t *b, size_t n)
{
    if (n != 4)
        return;
    uint32_t w = be32(b);
    unsigned op = w >> 30, rd = (w >> 25) & 31, op3 = (w >> 19) & 63;
    if (w == SPARC_ROI_BEGIN) {
        d->special = SP_ROI_BEGIN;
        return;
    }
    if (w == SPARC_ROI_END) {
        d->special = SP_ROI_END;
        return;
    }
    if (op == 2) {
        if (cfg.nwindows) {
            if (op3 == 0x3c)
                d->special = SP_SAVE;
            else if (op3 == 0x3d || op3 == 0x39) /* restore, return */
                d->special = SP_RESTORE;
            else if (op3 == 0x2b && rd == 0)
                d->special = SP_FLUSHW;
        }
        return;
    }
    if (op != 3)
        return;
    if (op3 == 0x2d || op3 == 0x3d) { /* prefetch, prefetcha: QEMU does no access */
        unsigned rs1 = (w >> 14) & 31, i = (w >> 13) & 1, rs2 = w & 31;
        d->special = SP_PREFETCH;
        d->pf_strong = rd >= 20 && rd <= 23;
        if (rs1 == 0 && i) {
            d->pf_known = 1;
            d->pf_addr = (uint64_t)(int64_t)((int32_t)(w << 19) >> 19); /* simm13 */
        } else if (rs1 == 0 && !i && rs2 == 0) {
            d->pf_known = 1;
            d->pf_addr = 0;
        }
        return;
    }
    /* casa casxa ldstub(a) swap(a) */
    d->locked = op3 == 0x3c || op3 == 0x3e || op3 == 0x0d || op3 == 0x1d || op3 == 0x0f || op3 == 0x1f;
    d->width = (uint8_t)sparc_width(op3, rd);
}

static void decode_arm(InsnDesc *d, const uint8_t *b, size_t n)
{
    if (n != 4)
        return;
    uint32_t w = le32(b);
    if (w == ARM_ROI_BEGIN) {
        d->special = SP_ROI_BEGIN;
        return;
    }
    if (w == ARM_ROI_END) {
        d->special = SP_ROI_END;
        return;
    }
    if ((w & 0xfd70f000u) == 0xf550f000u) { /* PLD: a hint, address in registers */
        d->special = SP_PREFETCH;
        return;
    }
    if ((w & 0x0fb00ff0u) == 0x01000090u) /* SWP, SWPB: a locked read-modify-write */
        d->locked = 1;
}

/* ------------------------------------------------------------ callbacks */

static void region_close(VCpu *v, const Counters *now, uint8_t why)
{
    Counters r;
    counters_sub(&r, now, &v->snap);
    if (v->n_regions >= MAX_REGIONS) {
        counters_add(&v->overflow, &r);
        v->n_overflow++;
    } else {
        if (v->n_regions == v->cap_regions) {
            v->cap_regions = v->cap_regions ? 2 * v->cap_regions : 16;
            v->regions = realloc(v->regions, v->cap_regions * sizeof *v->regions);
            v->closed_by = realloc(v->closed_by, v->cap_regions);
            v->seq = realloc(v->seq, v->cap_regions * sizeof *v->seq);
            if (!v->regions || !v->closed_by || !v->seq)
                abort();
        }
        v->regions[v->n_regions] = r;
        v->seq[v->n_regions] = v->open_seq;
        v->closed_by[v->n_regions] = why;
        v->n_regions++;
    }
    v->open = false;
}

static void prefetch_exec(VCpu *v, const InsnDesc *d)
{
    v->c.pf_issued++;
    if (!d->pf_known) {
        v->c.pf_unknown++;
        return;
    }
    bool strong = d->pf_strong && cfg.prefetch_strong;
    uint64_t a = d->pf_addr;
    /* The first and last page of the address space are never mapped: the
     * TLB cannot translate them. (The plugin cannot see page tables; the
     * only addresses a prefetch can name without a register are these and
     * RIP-relative ones, which are mapped.) */
    if (a < cfg.page || a >= -cfg.page) {
        if (strong)
            v->c.pf_trapped++;
        else
            v->c.pf_dropped++;
        return;
    }
    if (!have_dtlb)
        return;
    uint64_t vpn = a >> page_shift;
    if (array_find(&v->dtlb, vpn) || strong) {
        v->c.dtlb_accesses++;
        tlb_access(v, &v->dtlb, vpn, &v->c.dtlb_misses); /* hit, or a strong prefetch's walk */
    } else {
        v->c.pf_dropped++; /* a weak prefetch that misses the TLB */
    }
}

static void window_op(VCpu *v, uint8_t op)
{
    switch (op) {
    case SP_SAVE:
        if (v->cansave == 0) { /* overflow: spill the oldest window */
            v->c.win_spills++;
            v->cansave++;
            v->canrestore--;
        }
        v->cansave--;
        v->canrestore++;
        break;
    case SP_RESTORE:
        if (v->canrestore == 0) { /* underflow: fill a window */
            v->c.win_fills++;
            v->canrestore++;
            v->cansave--;
        }
        v->canrestore--;
        v->cansave++;
        break;
    case SP_FLUSHW: /* one spill trap per window in use */
        v->c.win_spills += v->canrestore;
        v->cansave += v->canrestore;
        v->canrestore = 0;
        break;
    }
}

/*
 * Progress audit (SPARC). QEMU raises some exceptions in the middle of a
 * block: a misaligned access (user mode: SIGBUS; the handler runs next) and
 * its own register-window spill/fill traps at save/restore/flushw (user mode:
 * handled inside QEMU, then the instruction runs again, in a block that
 * starts at it). The block callback has already counted the whole block, so
 * when the next block starts we work out where the previous one stopped:
 *   - every access reports after it happened, every exec callback before
 *     its instruction runs: v->done = instructions known to have completed;
 *   - a window instruction takes effect only once something after it has
 *     started (the instruction after it has an exec callback), or, when it
 *     ends its block, once the next block starts somewhere else;
 *   - a decoded plain load/store at or after v->done never reported: it
 *     faulted (user mode: an alignment trap).
 * Instructions that did not run are taken off the count.
 */
static void audit_progress(VCpu *v, unsigned idx)
{
    if (v->pending >= 0 && (unsigned)v->pending < idx) {
        window_op(v, v->pending_op);
        v->pending = -1;
    }
    if (idx > v->done)
        v->done = idx;
}

static void tb_finalize(VCpu *v, uint64_t next_vaddr)
{
    const TBDesc *p = v->cur_tb;
    if (!p)
        return;
    if (v->pending >= 0) {
        unsigned k = (unsigned)v->pending;
        if (v->done <= k && (k + 1 < p->n_insns || p->ivaddr[k] == next_vaddr)) {
            /* the window instruction trapped; it runs again from the next block */
            v->c.insns -= p->n_entry - k;
            v->pending = -1;
            return;
        }
        window_op(v, v->pending_op);
        v->pending = -1;
        if (v->done < k + 1)
            v->done = k + 1;
    }
    if (p->last_audit < 0 || (unsigned)p->last_audit < v->done)
        return; /* the block ran to its end */
    unsigned j = 0;
    while (p->audit_idx[j] < v->done)
        j++;
    const InsnDesc *d = &p->insn[p->audit_idx[j]];
    v->c.insns -= d->n_after; /* they never ran; the faulting one is emulated or skipped */
    unsigned w = d->width;
    if (w >= 2 && !system_mode) {
        int k = w > 8 ? 8 : (int)w;
        if (cfg.unaligned[k] == POL_TRAP)
            v->c.unaligned_trap++;
        else
            v->c.unaligned_hw++;
    } else {
        v->c.other_faults++; /* system mode: an MMU miss or another trap */
    }
}

/* The last instruction of an x86 block that starts near a page end: QEMU
 * 7.2 may have started translating an instruction that crosses into the
 * next page, given up on it (target/i386/tcg/translate.c, advance_pc ->
 * siglongjmp case 2) and left it in the plugin's view of the block although
 * it is not part of the block. Such a last instruction is counted and
 * fetched only when its own exec callback fires, which a phantom's never
 * does. */
static void tail_exec(VCpu *v, const InsnDesc *d)
{
    const TBDesc *t = d->tb;
    uint64_t va = t->ivaddr[d->idx];
    uint64_t last = va + t->isize[d->idx] - 1;
    v->c.insns++;
    if (UNLIKELY(trace_fp))
        trace_line("I %" PRIx64 " %u\n", va, t->isize[d->idx]);
    for (uint64_t l = va >> l1i_shift; l <= last >> l1i_shift; l++)
        l1i_fetch_line(v, l);
    for (uint64_t p = va >> page_shift; p <= last >> page_shift; p++) {
        tlb_access(v, &v->itlb, p, &v->c.itlb_misses);
        v->c.itlb_accesses++;
    }
}

static void special_exec(unsigned int vi, void *ud)
{
    VCpu *v = vcpus[vi];
    const InsnDesc *d = ud;
    if (UNLIKELY(!__atomic_load_n(&modelling, __ATOMIC_RELAXED))) {
        if (d->special != SP_ROI_BEGIN)
            return;
        /* the first region: from here on everything is modelled; the rest of
         * this block is counted by the region's start (n_after), not fetched */
        __atomic_store_n(&modelling, true, __ATOMIC_RELAXED);
    }
    if (UNLIKELY(regions_only && !v->open)) {
        /* between regions only a marker counts; like the first region under
         * fast_forward=1, a region's first block is counted by its start */
        if (d->special != SP_ROI_BEGIN && d->special != SP_ROI_END)
            return;
    } else {
        if (audit_faults)
            audit_progress(v, d->idx);
        if (UNLIKELY(d->tail))
            tail_exec(v, d);
    }
    switch (d->special) {
    case SP_SAVE:
    case SP_RESTORE:
    case SP_FLUSHW:
        v->pending = d->idx;
        v->pending_op = d->special;
        break;
    case SP_EXCEPTION:
        v->c.exceptions[d->entry & 7]++;
        break;
    case SP_PREFETCH:
        prefetch_exec(v, d);
        break;
    case SP_ROI_BEGIN: {
        v->any_marker = true;
        Counters now = v->c;
        now.insns -= d->n_after; /* the rest of the block runs inside */
        if (v->open)
            region_close(v, &now, 1);
        v->snap = now;
        v->open = true;
        v->open_seq = __atomic_fetch_add(&region_seq, 1, __ATOMIC_RELAXED);
        if (UNLIKELY(trace_fp))
            trace_line("B\n");
        break;
    }
    case SP_ROI_END: {
        v->any_marker = true;
        if (!v->open) {
            v->unmatched_ends++;
            break;
        }
        Counters now = v->c;
        now.insns -= d->n_after + 1u; /* neither the marker nor the rest of the block */
        region_close(v, &now, 0);
        if (UNLIKELY(trace_fp))
            trace_line("E\n");
        break;
    }
    }
}

static void tb_exec(unsigned int vi, void *ud)
{
    VCpu *v = vcpus[vi];
    const TBDesc *t = ud;

    if (UNLIKELY(!__atomic_load_n(&modelling, __ATOMIC_RELAXED)))
        return;
    if (UNLIKELY(regions_only && !v->open)) {
        /* the block a region ended in is audited now that the next one starts;
         * blocks between regions are not */
        if (audit_faults) {
            tb_finalize(v, t->vaddr);
            v->cur_tb = NULL;
        }
        return;
    }
    if (audit_faults) {
        tb_finalize(v, t->vaddr);
        v->cur_tb = t;
        v->done = 0;
    }
    v->c.insns += t->n_entry;
    if (UNLIKELY(trace_fp)) {
        pthread_mutex_lock(&trace_lock);
        for (uint32_t i = 0; i < t->n_entry; i++)
            fprintf(trace_fp, "I %" PRIx64 " %u\n", t->ivaddr[i], t->isize[i]);
        pthread_mutex_unlock(&trace_lock);
    }
    for (uint32_t i = 0; i < t->n_irun; i++) {
        l1i_fetch_line(v, t->irun[i].key);
        v->c.l1i_hits += t->irun[i].count - 1;
    }
    if (have_itlb) {
        for (uint32_t i = 0; i < t->n_prun; i++) {
            tlb_access(v, &v->itlb, t->prun[i].key, &v->c.itlb_misses);
            v->c.itlb_accesses += t->prun[i].count;
        }
    }
}

static void mem_exec(unsigned int vi, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud)
{
    VCpu *v = vcpus[vi];
    const InsnDesc *d = ud;
    if (UNLIKELY(!__atomic_load_n(&modelling, __ATOMIC_RELAXED)))
        return;
    if (UNLIKELY(regions_only && !v->open))
        return;
    unsigned size = 1u << qemu_plugin_mem_size_shift(info);
    /* QEMU 7.2 packs the direction above the MemOpIdx (include/qemu/plugin.h:
     * make_plugin_meminfo): 1 = read, 2 = write, 3 = an atomic
     * read-modify-write reported once (parallel TCG). */
    unsigned rw = (info >> 16) & 3;

    if (audit_faults && d->idx >= v->done)
        v->done = d->idx + 1u;
    uint64_t paddr = vaddr;
    if (system_mode) {
        struct qemu_plugin_hwaddr *hw = qemu_plugin_get_hwaddr(info, vaddr);
        if (hw) {
            if (qemu_plugin_hwaddr_is_io(hw)) { /* a device register: no cache, no TLB model */
                v->c.io_accesses++;
                return;
            }
            paddr = qemu_plugin_hwaddr_phys_addr(hw);
        }
    }
    if (UNLIKELY(trace_fp))
        trace_line("%c %" PRIx64 " %u\n", rw == 2 ? 'W' : 'R', vaddr, size);
    if (rw == 3) {
        data_access(v, vaddr, paddr, size, false, d->locked, true);
        if (UNLIKELY(trace_fp))
            trace_line("W %" PRIx64 " %u\n", vaddr, size);
        data_access(v, vaddr, paddr, size, true, d->locked, false);
        return;
    }
    data_access(v, vaddr, paddr, size, rw == 2, d->locked, rw != 2);
}

/* ------------------------------------------------------------ translation */

#define HASH_BITS 16
static TBDesc *tb_hash[1u << HASH_BITS];
static pthread_mutex_t tb_lock = PTHREAD_MUTEX_INITIALIZER;

static uint32_t hash_bytes(uint64_t vaddr, const uint8_t *b, size_t n)
{
    uint64_t h = vaddr * 0x9e3779b97f4a7c15ull ^ n;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return (uint32_t)(h ^ (h >> 29)) & ((1u << HASH_BITS) - 1);
}

static void add_run(Run *runs, uint32_t *n, uint64_t key)
{
    if (*n && runs[*n - 1].key == key) {
        runs[*n - 1].count++;
        return;
    }
    runs[*n].key = key;
    runs[*n].count = 1;
    (*n)++;
}

static TBDesc *build_desc(struct qemu_plugin_tb *tb, uint8_t *bytes, size_t n_bytes, size_t n)
{
    TBDesc *t = calloc(1, sizeof *t);
    t->vaddr = qemu_plugin_tb_vaddr(tb);
    t->n_insns = (uint32_t)n;
    t->n_bytes = (uint32_t)n_bytes;
    t->bytes = bytes;
    t->insn = calloc(n, sizeof *t->insn);
    t->ivaddr = calloc(n, sizeof *t->ivaddr);
    t->isize = calloc(n, 1);
    t->audit_idx = calloc(n, sizeof *t->audit_idx);
    /* a fetch touches at most 2 lines or pages (instructions are <= 15 bytes) */
    t->irun = calloc(2 * n, sizeof *t->irun);
    t->prun = calloc(2 * n, sizeof *t->prun);
    t->last_audit = -1;
    t->n_entry = (uint32_t)n;
    if (cfg.arch == ARCH_X86_64 && n >= 2) {
        struct qemu_plugin_insn *last = qemu_plugin_tb_get_insn(tb, n - 1);
        /* it starts so close to the page end that it may cross it (x86
         * instructions are at most 15 bytes; QEMU's pages are 4 KiB) */
        if ((qemu_plugin_insn_vaddr(last) & 4095) + 15 > 4096)
            t->n_entry = (uint32_t)n - 1; /* see tail_exec */
    }
    if (!t->insn || !t->ivaddr || !t->isize || !t->audit_idx || !t->irun || !t->prun)
        abort();
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        const uint8_t *b = qemu_plugin_insn_data(insn);
        size_t sz = qemu_plugin_insn_size(insn);
        uint64_t va = qemu_plugin_insn_vaddr(insn);
        InsnDesc *d = &t->insn[i];
        d->tb = t;
        d->idx = (uint16_t)i;
        d->tail = i >= t->n_entry;
        d->n_after = (uint16_t)(i < t->n_entry ? t->n_entry - 1 - i : 0);
        t->ivaddr[i] = va;
        t->isize[i] = (uint8_t)sz;
        switch (cfg.arch) {
        case ARCH_X86_64: decode_x86(d, b, sz, va); break;
        case ARCH_SPARC64: decode_sparc(d, b, sz); break;
        case ARCH_ARMV6: decode_arm(d, b, sz); break;
        }
        if (audit_faults && d->width)
            t->audit_idx[t->n_audit++] = (uint16_t)i;
        /* ARM Linux runs with high vectors: an exception enters at
         * 0xffff0000 + 4 x kind (ARM ARM B1.8.1); what the handler then does
         * (a kernel fixup) runs under the model like any other code */
        if (system_mode && cfg.arch == ARCH_ARMV6 && va >= 0xffff0000u && va <= 0xffff001cu && !(va & 3) &&
            !d->special) {
            d->special = SP_EXCEPTION;
            d->entry = (uint8_t)((va - 0xffff0000u) / 4);
        }
        /* sparc64: a trap enters at TBA + (TL > 0) x 0x4000 + TT x 32 (SPARC V9
         * 7.7): counted by kind; the handler itself runs under the model.
         * Linux's TL>0 table has the trap types below 0x100 only (ordinary
         * kernel text follows it: arch/sparc/kernel/ttable_64.S) */
        if (cfg.trap_table && va >= cfg.trap_table && va < cfg.trap_table + 0x6000 && !(va & 31) && !d->special) {
            int kind = sparc_trap_kind((unsigned)((va - cfg.trap_table) >> 5) & 0x1ff);
            if (kind >= 0) {
                d->special = SP_EXCEPTION;
                d->entry = (uint8_t)kind;
            }
        }
        /* the instruction after a window instruction proves it completed */
        if (i > 0 && !d->special && t->insn[i - 1].special >= SP_SAVE && t->insn[i - 1].special <= SP_FLUSHW)
            d->special = SP_PROGRESS;
        uint64_t last = va + (sz ? sz - 1 : 0);
        if (d->tail)
            continue;
        for (uint64_t l = va >> l1i_shift; l <= last >> l1i_shift; l++)
            add_run(t->irun, &t->n_irun, l);
        for (uint64_t p = va >> page_shift; p <= last >> page_shift; p++)
            add_run(t->prun, &t->n_prun, p);
    }
    if (t->n_audit)
        t->last_audit = t->audit_idx[t->n_audit - 1];
    return t;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    if (!n)
        return;
    if (n > 60000) {
        fprintf(stderr, "trapline-model: translation block of %zu instructions\n", n);
        abort();
    }
    /* the block's address, instruction sizes and bytes identify it for
     * deduplication (the sizes too: in system mode the same bytes may be
     * decoded in another x86 mode) */
    size_t n_bytes = 0;
    uint8_t sizes[512];
    for (size_t i = 0; i < n; i++) {
        size_t sz = qemu_plugin_insn_size(qemu_plugin_tb_get_insn(tb, i));
        n_bytes += sz;
        if (i < sizeof sizes)
            sizes[i] = (uint8_t)sz;
    }
    uint8_t *bytes = malloc(n_bytes ? n_bytes : 1);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        size_t sz = qemu_plugin_insn_size(insn);
        memcpy(bytes + off, qemu_plugin_insn_data(insn), sz);
        off += sz;
    }
    uint64_t vaddr = qemu_plugin_tb_vaddr(tb);
    uint32_t h = hash_bytes(vaddr, bytes, n_bytes);

    pthread_mutex_lock(&tb_lock);
    TBDesc *t;
    for (t = tb_hash[h]; t; t = t->next)
        if (t->vaddr == vaddr && t->n_insns == n && t->n_bytes == n_bytes && !memcmp(t->bytes, bytes, n_bytes) &&
            n <= sizeof sizes && !memcmp(t->isize, sizes, n))
            break;
    if (t) {
        free(bytes);
    } else {
        t = build_desc(tb, bytes, n_bytes, n);
        t->next = tb_hash[h];
        tb_hash[h] = t;
    }
    pthread_mutex_unlock(&tb_lock);

    qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec, QEMU_PLUGIN_CB_NO_REGS, t);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        InsnDesc *d = &t->insn[i];
        qemu_plugin_register_vcpu_mem_cb(insn, mem_exec, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, d);
        if (d->special || d->tail)
            qemu_plugin_register_vcpu_insn_exec_cb(insn, special_exec, QEMU_PLUGIN_CB_NO_REGS, d);
    }
}

/* ------------------------------------------------------------ output */

typedef struct {
    char *buf;
    size_t len, cap;
} Str;

static void sput(Str *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sput(Str *s, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(s->buf + s->len, s->cap - s->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < s->cap - s->len) {
            s->len += n;
            return;
        }
        s->cap = s->cap * 2 + (n > 0 ? (size_t)n : 0) + 4096;
        s->buf = realloc(s->buf, s->cap);
        if (!s->buf)
            abort();
    }
}

/* One unified level below the L1s (l2, l3), or null where there is none. */
static void put_lower(Str *s, const char *ind, const char *name, bool present, uint64_t rh, uint64_t rm, uint64_t wh,
                      uint64_t wm, uint64_t wb)
{
    if (!present) {
        sput(s, "%s\"%s\": null,\n", ind, name);
        return;
    }
    sput(s,
         "%s\"%s\": {\"accesses\": %" PRIu64 ", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64 ", \"read_hits\": %" PRIu64
         ", \"read_misses\": %" PRIu64 ", \"write_hits\": %" PRIu64 ", \"write_misses\": %" PRIu64
         ", \"writebacks\": %" PRIu64 "},\n",
         ind, name, rh + rm + wh + wm, rh + wh, rm + wm, rh, rm, wh, wm, wb);
}

static void put_stats(Str *s, const Counters *c, const char *ind)
{
    /* cycles: cpi * instructions + every penalty (docs/model.md) */
    uint64_t base = (uint64_t)llround(cfg.cpi * (double)c->insns);
    uint64_t l1i_mem = c->l1i_misses - c->l1i_miss_l2hit - c->l1i_miss_l3hit;
    uint64_t d_rmiss = c->l1d_load_misses + (cfg.l1d_wt ? 0 : c->l1d_store_misses);
    uint64_t d_mem = d_rmiss - c->l1d_rmiss_l2hit - c->l1d_rmiss_l3hit;
    uint64_t l2lat = have_l2 ? cfg.l2_lat : 0, l3lat = have_l3 ? cfg.l3_lat : 0;
    /* a miss costs the latency of the level that served it minus the L1 hit
     * latency already in the base; memory latencies were summed per access
     * (numa_lat[vCPU node][memory node]) */
    uint64_t cyc_ifetch = c->l1i_miss_l2hit * (l2lat - cfg.l1i_lat) + c->l1i_miss_l3hit * (l3lat - cfg.l1i_lat) +
                          c->mem_cycles_i - l1i_mem * cfg.l1i_lat;
    uint64_t cyc_data = c->l1d_rmiss_l2hit * (l2lat - cfg.l1d_lat) + c->l1d_rmiss_l3hit * (l3lat - cfg.l1d_lat) +
                        c->mem_cycles_d - d_mem * cfg.l1d_lat;
    uint64_t tlb_misses = c->itlb_misses + c->dtlb_misses;
    uint64_t cyc_tlb = have_stlb ? tlb_misses * cfg.stlb_lat + c->stlb_misses * cfg.tlb_miss
                                 : tlb_misses * cfg.tlb_miss;
    uint64_t cyc_straddle = (uint64_t)llround(cfg.straddle_penalty * (double)c->straddles);
    uint64_t cyc_unal_hw = (uint64_t)llround(cfg.unaligned_penalty * (double)c->unaligned_hw);
    uint64_t cyc_unal_trap = c->unaligned_trap * cfg.trap_cost;
    uint64_t cyc_lock = c->locked_inline * cfg.lock_cost + c->locked_split * cfg.split_lock_cost;
    uint64_t cyc_pf = c->pf_trapped * cfg.prefetch_trap;
    uint64_t cyc_win = (c->win_spills + c->win_fills) * cfg.window_trap;
    uint64_t cycles = base + cyc_ifetch + cyc_data + cyc_tlb + cyc_straddle + cyc_unal_hw + cyc_unal_trap +
                      cyc_lock + cyc_pf + cyc_win;

    sput(s, "%s\"instructions\": %" PRIu64 ",\n", ind, c->insns);
    sput(s, "%s\"cycles\": %" PRIu64 ",\n", ind, cycles);
    sput(s,
         "%s\"cycles_breakdown\": {\"base\": %" PRIu64 ", \"ifetch\": %" PRIu64 ", \"data\": %" PRIu64
         ", \"tlb\": %" PRIu64 ", \"straddle\": %" PRIu64 ", \"unaligned_hw\": %" PRIu64
         ", \"unaligned_trap\": %" PRIu64 ", \"lock\": %" PRIu64 ", \"prefetch_trap\": %" PRIu64
         ", \"window_trap\": %" PRIu64 "},\n",
         ind, base, cyc_ifetch, cyc_data, cyc_tlb, cyc_straddle, cyc_unal_hw, cyc_unal_trap, cyc_lock, cyc_pf,
         cyc_win);
    sput(s, "%s\"l1i\": {\"accesses\": %" PRIu64 ", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64 "},\n", ind,
         c->l1i_hits + c->l1i_misses, c->l1i_hits, c->l1i_misses);
    sput(s,
         "%s\"l1d\": {\"accesses\": %" PRIu64 ", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64
         ", \"load_hits\": %" PRIu64 ", \"load_misses\": %" PRIu64 ", \"store_hits\": %" PRIu64
         ", \"store_misses\": %" PRIu64 ", \"writebacks\": %" PRIu64 "},\n",
         ind, c->l1d_load_hits + c->l1d_load_misses + c->l1d_store_hits + c->l1d_store_misses,
         c->l1d_load_hits + c->l1d_store_hits, c->l1d_load_misses + c->l1d_store_misses, c->l1d_load_hits,
         c->l1d_load_misses, c->l1d_store_hits, c->l1d_store_misses, c->l1d_writebacks);
    put_lower(s, ind, "l2", have_l2, c->l2_read_hits, c->l2_read_misses, c->l2_write_hits, c->l2_write_misses,
              c->l2_writebacks);
    put_lower(s, ind, "l3", have_l3, c->l3_read_hits, c->l3_read_misses, c->l3_write_hits, c->l3_write_misses,
              c->l3_writebacks);
    sput(s, "%s\"memory_reads_by_node\": [", ind);
    for (unsigned k = 0; k < cfg.numa_nodes; k++)
        sput(s, "%s%" PRIu64, k ? ", " : "", c->mem_reads[k]);
    sput(s, "],\n%s\"memory_writes_by_node\": [", ind);
    for (unsigned k = 0; k < cfg.numa_nodes; k++)
        sput(s, "%s%" PRIu64, k ? ", " : "", c->mem_writes[k]);
    sput(s, "],\n%s\"memory_read_cycles\": %" PRIu64 ",\n", ind, c->mem_cycles_i + c->mem_cycles_d);
    sput(s, "%s\"io_accesses\": %" PRIu64 ",\n", ind, c->io_accesses);
    sput(s, "%s\"itlb\": {\"accesses\": %" PRIu64 ", \"misses\": %" PRIu64 "},\n", ind, c->itlb_accesses,
         c->itlb_misses);
    sput(s, "%s\"dtlb\": {\"accesses\": %" PRIu64 ", \"misses\": %" PRIu64 "},\n", ind, c->dtlb_accesses,
         c->dtlb_misses);
    if (have_stlb)
        sput(s, "%s\"stlb\": {\"accesses\": %" PRIu64 ", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64 "},\n", ind,
             c->stlb_hits + c->stlb_misses, c->stlb_hits, c->stlb_misses);
    else
        sput(s, "%s\"stlb\": null,\n", ind);
    sput(s, "%s\"memory_accesses\": {\"loads\": %" PRIu64 ", \"stores\": %" PRIu64 "},\n", ind, c->loads,
         c->stores);
    sput(s, "%s\"straddling_accesses\": %" PRIu64 ",\n", ind, c->straddles);
    sput(s, "%s\"unaligned_accesses\": %" PRIu64 ",\n", ind, c->unaligned_hw + c->unaligned_trap);
    sput(s,
         "%s\"traps\": {\"unaligned\": %" PRIu64 ", \"window_spill\": %" PRIu64 ", \"window_fill\": %" PRIu64
         ", \"prefetch\": %" PRIu64 "},\n",
         ind, c->unaligned_trap, c->win_spills, c->win_fills, c->pf_trapped);
    sput(s, "%s\"locked\": {\"in_line\": %" PRIu64 ", \"split\": %" PRIu64 "},\n", ind, c->locked_inline,
         c->locked_split);
    sput(s,
         "%s\"prefetches\": {\"issued\": %" PRIu64 ", \"dropped\": %" PRIu64 ", \"trapped\": %" PRIu64
         ", \"unknown_address\": %" PRIu64 "},\n",
         ind, c->pf_issued, c->pf_dropped, c->pf_trapped, c->pf_unknown);
    if (cfg.trap_table) {
        sput(s, "%s\"trap_table_entries\": {", ind);
        for (int k = TK_UNALIGNED; k <= TK_OTHER; k++)
            sput(s, "%s\"%s\": %" PRIu64, k ? ", " : "", trap_kind_name[k], c->exceptions[k]);
        sput(s, "},\n");
    }
    if (system_mode && cfg.arch == ARCH_ARMV6)
        sput(s,
             "%s\"exceptions\": {\"undefined\": %" PRIu64 ", \"svc\": %" PRIu64 ", \"prefetch_abort\": %" PRIu64
             ", \"data_abort\": %" PRIu64 ", \"irq\": %" PRIu64 ", \"fiq\": %" PRIu64 "},\n",
             ind, c->exceptions[1], c->exceptions[2], c->exceptions[3], c->exceptions[4], c->exceptions[6],
             c->exceptions[7]);
    sput(s, "%s\"other_faults\": %" PRIu64 "\n", ind, c->other_faults);
}

static void put_json_string(Str *s, const char *v)
{
    sput(s, "\"");
    for (; *v; v++) {
        unsigned char ch = (unsigned char)*v;
        if (ch == '"' || ch == '\\')
            sput(s, "\\%c", ch);
        else if (ch < 0x20)
            sput(s, "\\u%04x", ch);
        else
            sput(s, "%c", ch);
    }
    sput(s, "\"");
}

static void put_options(Str *s)
{
    static const char *const pol[] = {"hw", "trap"};
    sput(s, "  \"options\": {\"arch\": \"%s\", \"cpi\": %.17g,\n", arch_names[cfg.arch], cfg.cpi);
    sput(s,
         "    \"l1i_size\": %" PRIu64 ", \"l1i_assoc\": %" PRIu64 ", \"l1i_line\": %" PRIu64 ", \"l1i_lat\": %" PRIu64
         ",\n",
         cfg.l1i_size, cfg.l1i_assoc, cfg.l1i_line, cfg.l1i_lat);
    sput(s,
         "    \"l1d_size\": %" PRIu64 ", \"l1d_assoc\": %" PRIu64 ", \"l1d_line\": %" PRIu64 ", \"l1d_lat\": %" PRIu64
         ", \"l1d_write\": \"%s\",\n",
         cfg.l1d_size, cfg.l1d_assoc, cfg.l1d_line, cfg.l1d_lat, cfg.l1d_wt ? "wt" : "wb");
    sput(s,
         "    \"l2_size\": %" PRIu64 ", \"l2_assoc\": %" PRIu64 ", \"l2_line\": %" PRIu64 ", \"l2_lat\": %" PRIu64
         ", \"l3_size\": %" PRIu64 ", \"l3_assoc\": %" PRIu64 ", \"l3_line\": %" PRIu64 ", \"l3_lat\": %" PRIu64
         ", \"mem_lat\": %" PRIu64 ",\n",
         cfg.l2_size, cfg.l2_assoc, cfg.l2_line, cfg.l2_lat, cfg.l3_size, cfg.l3_assoc, cfg.l3_line, cfg.l3_lat,
         cfg.mem_lat);
    sput(s, "    \"numa_nodes\": %" PRIu64 ", \"numa_lat\": [", cfg.numa_nodes);
    for (unsigned i = 0; i < cfg.numa_nodes; i++) {
        sput(s, "%s[", i ? ", " : "");
        for (unsigned j = 0; j < cfg.numa_nodes; j++)
            sput(s, "%s%" PRIu64, j ? ", " : "", cfg.numa_lat[i][j]);
        sput(s, "]");
    }
    sput(s, "], \"numa_mem\": [");
    for (unsigned i = 0; i < numa_mem_n; i++)
        sput(s, "%s%" PRIu64, i ? ", " : "", cfg.numa_mem[i]);
    sput(s, "], \"numa_cpus\": [");
    for (unsigned i = 0; i < cfg.n_numa_cpus; i++)
        sput(s, "%s%" PRIu64, i ? ", " : "", cfg.numa_cpus[i]);
    sput(s, "], \"numa_interleave\": %" PRIu64 ",\n", cfg.numa_interleave);
    sput(s,
         "    \"itlb_entries\": %" PRIu64 ", \"itlb_assoc\": %" PRIu64 ", \"dtlb_entries\": %" PRIu64
         ", \"dtlb_assoc\": %" PRIu64 ", \"page\": %" PRIu64 ", \"tlb_miss\": %" PRIu64 ",\n",
         cfg.itlb_entries, cfg.itlb_assoc, cfg.dtlb_entries, cfg.dtlb_assoc, cfg.page, cfg.tlb_miss);
    sput(s, "    \"stlb_entries\": %" PRIu64 ", \"stlb_assoc\": %" PRIu64 ", \"stlb_lat\": %" PRIu64 ",\n",
         cfg.stlb_entries, cfg.stlb_assoc, cfg.stlb_lat);
    sput(s,
         "    \"unaligned2\": \"%s\", \"unaligned4\": \"%s\", \"unaligned8\": \"%s\", \"unaligned_penalty\": %.17g"
         ", \"straddle_penalty\": %.17g,\n",
         pol[cfg.unaligned[2]], pol[cfg.unaligned[4]], pol[cfg.unaligned[8]], cfg.unaligned_penalty,
         cfg.straddle_penalty);
    sput(s,
         "    \"trap_cost\": %" PRIu64 ", \"lock_cost\": %" PRIu64 ", \"split_lock_cost\": %" PRIu64
         ", \"prefetch\": \"%s\", \"prefetch_trap\": %" PRIu64 ", \"nwindows\": %" PRIu64 ", \"window_trap\": %" PRIu64
         ", \"trap_table\": %" PRIu64 ", \"fast_forward\": %" PRIu64 "},\n",
         cfg.trap_cost, cfg.lock_cost, cfg.split_lock_cost, cfg.prefetch_strong ? "strong" : "weak",
         cfg.prefetch_trap, cfg.nwindows, cfg.window_trap, cfg.trap_table, cfg.fast_forward);
}

static void plugin_exit(qemu_plugin_id_t id, void *p)
{
    Str s = {0};
    Counters total;
    memset(&total, 0, sizeof total);
    bool any_marker = false;
    for (unsigned i = 0; i < MAX_VCPUS; i++)
        if (vcpus[i]) {
            VCpu *v = vcpus[i];
            if (audit_faults)
                tb_finalize(v, UINT64_MAX);
            v->cur_tb = NULL;
            any_marker |= v->any_marker;
            counters_add(&total, &v->c);
        }

    sput(&s, "{\n  \"tool\": \"trapline-model\",\n  \"format\": 1,\n");
    sput(&s, "  \"arch\": \"%s\",\n  \"qemu_target\": ", arch_names[cfg.arch]);
    put_json_string(&s, target_name);
    sput(&s, ",\n  \"system_emulation\": %s,\n", system_mode ? "true" : "false");
    put_options(&s);
    sput(&s, "  \"roi_markers\": %s,\n", any_marker ? "true" : "false");
    sput(&s, "  \"regions\": [");
    bool first = true;
    static const char *const why[] = {"end_marker", "begin_marker", "exit"};
    for (unsigned i = 0; i < MAX_VCPUS; i++) {
        VCpu *v = vcpus[i];
        if (!v)
            continue;
        if (!any_marker) { /* the whole run is the region */
            v->snap = (Counters){0};
            v->open = true;
        }
        if (v->open)
            region_close(v, &v->c, 2);
        for (size_t r = 0; r < v->n_regions; r++) {
            sput(&s, "%s\n    {\n      \"vcpu\": %u,\n      \"index\": %zu,\n      \"marked\": %s,\n", first ? "" : ",",
                 i, r, any_marker ? "true" : "false");
            sput(&s, "      \"closed_by\": \"%s\",\n      \"seq\": %" PRIu64 ",\n      \"vcpu_node\": %u,\n",
                 why[v->closed_by[r]], v->seq[r], v->node);
            put_stats(&s, &v->regions[r], "      ");
            sput(&s, "    }");
            first = false;
        }
        if (v->n_overflow) {
            sput(&s, "%s\n    {\n      \"vcpu\": %u,\n      \"index\": \"overflow\",\n      \"regions\": %" PRIu64
                     ",\n", first ? "" : ",", i, v->n_overflow);
            put_stats(&s, &v->overflow, "      ");
            sput(&s, "    }");
            first = false;
        }
    }
    sput(&s, "\n  ],\n  \"total\": {\n");
    put_stats(&s, &total, "    ");
    sput(&s, "  }\n}\n");

    if (trace_fp) {
        fclose(trace_fp);
        trace_fp = NULL;
    }
    if (cfg.out) {
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s.tmp%d", cfg.out, (int)getpid());
        FILE *f = fopen(tmp, "w");
        if (!f || fwrite(s.buf, 1, s.len, f) != s.len || fclose(f) || rename(tmp, cfg.out)) {
            fprintf(stderr, "trapline-model: cannot write %s: %s\n", cfg.out, strerror(errno));
            unlink(tmp);
        }
    } else {
        fwrite(s.buf, 1, s.len, stderr); /* qemu_plugin_outs() is silent without -d plugin */
        fflush(stderr);
    }
    free(s.buf);
}

/* ------------------------------------------------------------ install */

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    set_defaults();
    target_name = info->target_name ? strdup(info->target_name) : "";
    system_mode = info->system_emulation;
    enum arch target;
    if (!strcmp(target_name, "x86_64"))
        target = ARCH_X86_64;
    else if (!strcmp(target_name, "sparc64"))
        target = ARCH_SPARC64;
    else if (!strcmp(target_name, "arm"))
        target = ARCH_ARMV6;
    else
        return fail("QEMU target '%s' is not modelled; the model runs under qemu-x86_64, qemu-sparc64, qemu-arm "
                    "or the matching qemu-system-*", target_name);
    cfg.arch = target;
    for (int i = 0; i < argc; i++)
        if (parse_option(argv[i]))
            return -1;
    if (arch_given && cfg.arch != target)
        return fail("arch=%s but this QEMU emulates '%s'", arch_names[cfg.arch], target_name);
    if (validate())
        return -1;

    l1i_shift = log2u(cfg.l1i_line);
    l1d_shift = log2u(cfg.l1d_line);
    l1d_line_mask = cfg.l1d_line - 1;
    have_l2 = cfg.l2_size != 0;
    l2_shift = have_l2 ? log2u(cfg.l2_line) : 0;
    have_l3 = cfg.l3_size != 0;
    l3_shift = have_l3 ? log2u(cfg.l3_line) : 0;
    itag = system_mode ? ITAG : 0;
    modelling = !cfg.fast_forward;
    regions_only = cfg.fast_forward == 2;
    page_shift = log2u(cfg.page);
    have_stlb = cfg.stlb_entries != 0;
    audit_faults = cfg.arch == ARCH_SPARC64;

    if (cfg.trace) {
        trace_fp = fopen(cfg.trace, "w");
        if (!trace_fp)
            return fail("trace=%s: cannot open: %s", cfg.trace, strerror(errno));
        setvbuf(trace_fp, NULL, _IOFBF, 1 << 20);
    }
    qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, plugin_exit, NULL);
    return 0;
}
