/*
 * model.h - what the timing plugin's C files share (internal; not an API).
 *
 * The plugin is one .so built from (model/build.sh):
 *   trapline-model.c  install, the vCPU, block, instruction and memory callbacks,
 *                     translation (block descriptors)
 *   options.c         the options (generated from options.def: struct, defaults,
 *                     parser, range checks, echo, help=json) and the checks across them
 *   caches.c          caches, TLBs and NUMA memory: the data and fetch paths
 *   traps.c           prefetches, register windows and the SPARC progress audit
 *   decode.c          x86, sparc64 and ARM instruction decoding, region markers
 *   stats.c           counters, regions and the stats JSON
 *   contention.c      lockstep=on: threads on several vCPUs in the order of their
 *                     modelled clocks, lock-line hand-offs (off: nothing of it runs)
 */
#ifndef TRAPLINE_MODEL_H
#define TRAPLINE_MODEL_H

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <qemu-plugin.h>

#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
/* a step of a hot path inlined into its callers (caches.c's miss walk, timing.c's prefetchers) */
#define HOT __attribute__((always_inline))

#define MAX_VCPUS 1024
#define MAX_REGIONS 100000
#define MAX_NODES 8
#define INVALID_TAG UINT64_MAX

static inline bool is_pow2(uint64_t x)
{
    return x && !(x & (x - 1));
}

static inline unsigned log2u(uint64_t x)
{
    return 63 - __builtin_clzll(x);
}

/* ------------------------------------------------------------ options */

enum arch { ARCH_X86_64, ARCH_SPARC64, ARCH_ARMV6 }; /* the values of arch= (options.def) */
enum { POL_HW = 0, POL_TRAP = 1 };                  /* the values of unaligned<w>= */

#define LIST_MAX 64 /* values of a LIST or MATRIX option (numa_nodes^2 <= 64) */

/* The options struct, one field per OPT line of options.def (an ENUM is the
 * index of its value; a LIST has its values and their count, name_n). */
#define OPT_FIELD_U64(n) uint64_t n;
#define OPT_FIELD_F64(n) double n;
#define OPT_FIELD_F64P(n) double n;
#define OPT_FIELD_ENUM(n) int n;
#define OPT_FIELD_STR(n) char *n;
#define OPT_FIELD_LIST(n) uint64_t n[LIST_MAX]; unsigned n##_n;
#define OPT_FIELD_MATRIX(n) OPT_FIELD_LIST(n)
typedef struct {
#define OPT(name, kind, def, min, max, unit, field, conv, doc) OPT_FIELD_##kind(name)
#include "options.def"
#undef OPT
} Config;

enum opt_id {
#define OPT(name, ...) OPT_##name,
#include "options.def"
#undef OPT
    OPT_COUNT
};

/* each option's largest valid value (OPT_MAX_rob ...): what a table sized by an option holds */
enum opt_max {
#define OPT(name, kind, def, min, max, ...) OPT_MAX_##name = max,
#include "options.def"
#undef OPT
};

extern Config cfg;
extern bool opt_given[OPT_COUNT]; /* set on the command line (not a default) */
extern const char *const arch_names[];
/* derived by validate(): numa_lat as a matrix (mem_lat everywhere without
 * numa_lat=), the unaligned policy by access width 2, 4, 8 */
extern uint64_t numa_lat_m[MAX_NODES][MAX_NODES];
extern int unaligned_pol[9];
/* derived by validate(): straddle_penalty and unaligned_penalty as integers where they are whole
 * cycles (then a count's cycles are a product, as the double's rounding gives them), else UINT64_MAX */
extern uint64_t straddle_pen_int, unaligned_pen_int;

int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void options_defaults(void);
int options_parse(const char *opt);
int options_validate(void);
int options_help(int argc, char **argv); /* help=json: 1 if printed, -1 on error, 0 if not asked */

/* ------------------------------------------------------------ counters */

/* Every counter is a uint64_t so that regions are differences of snapshots. */
typedef struct {
    uint64_t insns;
    uint64_t rep_repeats; /* x86: executions of a rep-prefixed string instruction after its first iteration
                           * (QEMU runs one iteration per execution; in insns, not in "instructions") */
    uint64_t l1i_hits, l1i_misses, l1i_miss_l2hit;
    uint64_t l1i_fetches; /* fetches that moved to a line other than the one fetched last (a one-line fetch
                           * buffer's reads of the L1I) */
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
    uint64_t lean[2]; /* the leaves' accesses (data_access, mem_lean_body): [0] loads, [1] stores, each one
                       * DTLB access, one access and one L1D hit; put_stats adds them to those counters */
    uint64_t straddles, unaligned_hw, unaligned_trap;
    uint64_t locked_inline, locked_split;
    uint64_t pf_issued, pf_dropped, pf_trapped, pf_unknown;
    uint64_t win_spills, win_fills;
    uint64_t other_faults;
    uint64_t ctx_switches; /* ctx_switch=: address-space switches that emptied the TLBs (context.c) */
    uint64_t exceptions[8]; /* system mode: ARM entries by vector (0x00 reset .. 0x1c FIQ) / 4;
                             * sparc64 trap-table entries by kind (enum trap_kind) */
    uint64_t wait_cycles, handoffs; /* lockstep=on (contention.c): cycles spent waiting for another vCPU
                                     * (a lock line's hand-off, a join), and the hand-offs */
    /* core=ooo (timing.c) */
    uint64_t ooo_stall_q8;          /* cycles x 256 the core stalled for data: the data part of its cycles */
    uint64_t misses_overlapped;     /* L1D demand misses made while another was outstanding (timing.c, primary_miss) */
    uint64_t dependent_misses;      /* load misses that waited for an outstanding load their address comes from */
    uint64_t l1d_inflight;          /* L1D accesses to a line still being filled (a miss's or a prefetch's) */
    uint64_t hwpf_issued[2], hwpf_useful[2], hwpf_late[2]; /* hardware prefetches into the L1D [0] and the
                                              * L2 [1]: lines fetched; lines whose first demand access found them
                                              * filled (gem5's pfUseful); lines it met still on their way */
    uint64_t hwpf_dropped;          /* prefetches dropped because every MSHR of their level was busy */
    uint64_t hwpf_l2_hits, hwpf_l2_misses, hwpf_l3_hits, hwpf_l3_misses; /* the prefetches' lookups below */
} Counters;

/* what timing.c compares an access's counts with (the counts before it) */
typedef struct {
    uint64_t misses, l2hit, l3hit, mem_cycles, dtlb_misses, stlb_misses;
} AccessMark;

#define NCOUNTERS (sizeof(Counters) / sizeof(uint64_t))

/* the parts of a region's cycles (cycles_breakdown; CYC_WAIT only with lockstep=on) */
enum cyc_part { CYC_BASE, CYC_IFETCH, CYC_DATA, CYC_TLB, CYC_STRADDLE, CYC_UNAL_HW, CYC_UNAL_TRAP, CYC_LOCK, CYC_PF,
                CYC_WIN, CYC_ENTRY, CYC_WAIT, CYC_NPARTS };
uint64_t counters_cycles(const Counters *c, uint64_t *parts); /* stats.c; parts may be NULL */
uint64_t counters_serial(const Counters *c); /* stats.c: the cycles but the base and the data stalls */
void counters_sub(Counters *r, const Counters *a, const Counters *b);
void counters_add(Counters *r, const Counters *a);

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
    uint64_t *e;        /* the sets, stride entries each (a split array: the head ways only) */
    uint64_t *t;        /* a split array: the other ways of each set, ways - stride each; else NULL */
    uint64_t set_mask;
    unsigned ways;
    unsigned stride;    /* entries of e per set: ways, or a split array's head ways */
    unsigned sel;       /* array_read's case: ways, or 0 for a split array */
    unsigned shift; /* line (or page) size, log2 */
} Array;

/* A large array (an L3's tag array, larger than the host's L2) is split: the
 * first SPLIT_HEAD ways of every set (where a set's hits mostly are) in one
 * dense array, the other ways in a second. The hits then touch a quarter (20
 * ways) of the host memory they did; the recency order, victims and counts
 * are those of one array of the set's ways in order (the head's ways, then
 * the tail's). */
#define SPLIT_HEAD 4 /* array_read4_nb reads the head: 4 */

void array_init(Array *a, uint64_t entries, uint64_t ways, unsigned shift);

/* Read-style access of key k: returns 1 on a hit. On a miss, *victim is the
 * evicted entry (INVALID_TAG if none). One pass over the set: the most
 * recently used way first (the common case: no store), then the others,
 * each moved one way down while it is scanned, so that a hit or the miss
 * only has to put the key at way 0 (no second loop, no memmove call). */
static inline __attribute__((always_inline)) int array_read_any(uint64_t *s, unsigned w, uint64_t k,
                                                                uint64_t *victim)
{
    uint64_t carry = s[0];
    if (LIKELY((carry >> 1) == k))
        return 1;
    for (unsigned i = 1; i < w; i++) {
        uint64_t x = s[i];
        s[i] = carry;
        if ((x >> 1) == k) {
            s[0] = x;
            return 1;
        }
        carry = x;
    }
    *victim = carry;
    s[0] = k << 1;
    return 0;
}

/* The same for a set of a constant W ways, unrolled (the carry stays in
 * registers): the L1s, L2s and TLBs of the x86_64 and armv6 machines. Kept
 * beside array_read_any on purpose: serving the other set sizes with this
 * body (unrolled by 8 around a variable count) made sparc64's model/bench.sh
 * 3-5% slower (0.382-0.393 s against 0.394-0.413 s, five interleaved rounds;
 * stats identical). */
static inline __attribute__((always_inline)) int array_read_w(uint64_t *s, const unsigned W, uint64_t k,
                                                              uint64_t *victim)
{
    uint64_t carry = s[0];
    if (LIKELY((carry >> 1) == k))
        return 1;
#pragma GCC unroll 8
    for (unsigned i = 1; i < W; i++) {
        uint64_t x = s[i];
        s[i] = carry;
        if ((x >> 1) == k) {
            s[0] = x;
            return 1;
        }
        carry = x;
    }
    *victim = carry;
    s[0] = k << 1;
    return 0;
}

/* The same read of a key known not to be in its set of W ways: the ways move down one, the last is
 * the victim, the key goes in at way 0 (a prefetch's fill, after its caller looked) */
static inline __attribute__((always_inline)) void array_insert_w(uint64_t *s, const unsigned W, uint64_t k,
                                                                uint64_t *victim)
{
    *victim = s[W - 1];
#pragma GCC unroll 8
    for (unsigned i = W - 1; i > 0; i--)
        s[i] = s[i - 1];
    s[0] = k << 1;
}

/* A read of a set of 4 ways (s), or of a split array's set (its 4 head ways
 * in s, the other tw ways in t), without a branch on where the key sits: each
 * way's new entry is selected by masks (the key above it: it stays; else the
 * one above moves down). A set whose hits fall on any way (the STLB's, the
 * L3's on random accesses) otherwise costs a mispredicted branch per read.
 * Only a key not in the head takes a branch (and scans the tail). */
static inline __attribute__((always_inline)) int array_read4_nb(uint64_t *s, uint64_t k, uint64_t *victim, uint64_t *t,
                                                                unsigned tw)
{
    uint64_t e0 = s[0], e1 = s[1], e2 = s[2], e3 = s[3];
#if defined(__x86_64__)
    /* the same selections as conditional moves, one compare per way feeding
     * every selection it decides (GCC turns the C selections into branches,
     * or into masks at about twice the instructions: x86_64 reps=100 -4%):
     * way i's new entry is the one above it until the key is found above it;
     * x is the way holding the key (e0 when none does: then a miss) */
    uint64_t x = e0, s1 = e0, s2 = e1, s3 = e2;
    __asm__("cmp %[a], %[k]\n\tcmove %[e1], %[s1]\n\tcmove %[e2], %[s2]\n\tcmove %[e3], %[s3]"
            : [s1] "+r"(s1), [s2] "+r"(s2), [s3] "+r"(s3)
            : [a] "r"(e0 >> 1), [k] "r"(k), [e1] "rm"(e1), [e2] "rm"(e2), [e3] "rm"(e3)
            : "cc");
    __asm__("cmp %[a], %[k]\n\tcmove %[e1], %[x]\n\tcmove %[e2], %[s2]\n\tcmove %[e3], %[s3]"
            : [x] "+r"(x), [s2] "+r"(s2), [s3] "+r"(s3)
            : [a] "r"(e1 >> 1), [k] "r"(k), [e1] "rm"(e1), [e2] "rm"(e2), [e3] "rm"(e3)
            : "cc");
    __asm__("cmp %[a], %[k]\n\tcmove %[e2], %[x]\n\tcmove %[e3], %[s3]"
            : [x] "+r"(x), [s3] "+r"(s3)
            : [a] "r"(e2 >> 1), [k] "r"(k), [e2] "rm"(e2), [e3] "rm"(e3)
            : "cc");
    __asm__("cmp %[a], %[k]\n\tcmove %[e3], %[x]" : [x] "+r"(x) : [a] "r"(e3 >> 1), [k] "r"(k), [e3] "rm"(e3) : "cc");
    s[1] = s1;
    s[2] = s2;
    s[3] = s3;
    if (LIKELY((x >> 1) == k)) {
        s[0] = x;
        return 1;
    }
#else
    uint64_t m0 = -(uint64_t)((e0 >> 1) == k), m1 = -(uint64_t)((e1 >> 1) == k);
    uint64_t m2 = -(uint64_t)((e2 >> 1) == k), m3 = -(uint64_t)((e3 >> 1) == k);
    uint64_t a2 = m0 | m1, a3 = a2 | m2; /* the key in ways 0..1, 0..2 */
    uint64_t x = (e0 & m0) | (e1 & m1) | (e2 & m2) | (e3 & m3); /* at most one matches */
    s[1] = (e1 & m0) | (e0 & ~m0);
    s[2] = (e2 & a2) | (e1 & ~a2);
    s[3] = (e3 & a3) | (e2 & ~a3);
    if (LIKELY(a3 | m3)) {
        s[0] = x;
        return 1;
    }
#endif
    uint64_t carry = e3;
    for (unsigned i = 0; i < tw; i++) {
        uint64_t y = t[i];
        t[i] = carry;
        if ((y >> 1) == k) {
            s[0] = y;
            return 1;
        }
        carry = y;
    }
    *victim = carry;
    s[0] = k << 1;
    return 0;
}

static inline __attribute__((always_inline)) int array_read(Array *a, uint64_t k, uint64_t *victim)
{
    uint64_t set = k & a->set_mask;
    uint64_t *s = a->e + set * a->stride;
    switch (a->sel) { /* the x86_64 and armv6 machines' L1s, L2s and TLBs; a split L3 */
    case 4: return array_read_w(s, 4, k, victim);
    case 8: return array_read_w(s, 8, k, victim);
    case 0: return array_read4_nb(s, k, victim, a->t + set * (a->ways - SPLIT_HEAD), a->ways - SPLIT_HEAD);
    default: return array_read_any(s, a->ways, k, victim);
    }
}

/* array_read for an array whose hits fall on any of its ways (the STLB): a
 * set of 4 ways without a branch on the way (array_read4_nb). */
static inline __attribute__((always_inline)) int array_read_spread(Array *a, uint64_t k, uint64_t *victim)
{
    if (a->sel == 4)
        return array_read4_nb(a->e + (k & a->set_mask) * 4, k, victim, NULL, 0);
    return array_read(a, k, victim);
}

/* The walk's arrays when their shape is known at compile time (caches.c,
 * X86_SHAPE): W = 4 or 8, an array of W ways that is not split; W = 0, a
 * split array of SPLIT_HEAD + TW ways; W < 0, any (array_read's switch). The
 * same reads, without the switch on the kind and with constant strides. */
static inline __attribute__((always_inline)) uint64_t *array_mru_c(Array *a, uint64_t k, const int W)
{
    if (W < 0)
        return a->e + (k & a->set_mask) * a->stride;
    return a->e + (k & a->set_mask) * (W ? (unsigned)W : SPLIT_HEAD);
}

static inline __attribute__((always_inline)) int array_read_c(Array *a, uint64_t k, uint64_t *victim, const int W,
                                                              const unsigned TW)
{
    if (W < 0)
        return array_read(a, k, victim);
    uint64_t set = k & a->set_mask;
    if (W == 0)
        return array_read4_nb(a->e + set * SPLIT_HEAD, k, victim, a->t + set * TW, TW);
    return array_read_w(a->e + set * (unsigned)W, (unsigned)W, k, victim);
}

/* Where key k sits, or NULL; no recency change. */
static inline uint64_t *array_find(Array *a, uint64_t k)
{
    uint64_t set = k & a->set_mask;
    uint64_t *s = a->e + set * a->stride;
    for (unsigned i = 0; i < a->stride; i++)
        if ((s[i] >> 1) == k)
            return s + i;
    if (a->t) {
        unsigned tw = a->ways - SPLIT_HEAD;
        uint64_t *t = a->t + set * tw;
        for (unsigned i = 0; i < tw; i++)
            if ((t[i] >> 1) == k)
                return t + i;
    }
    return NULL;
}

/* Whether key k is in the array, no recency change: for a set of 8 ways (an L1D's, an L2's: their
 * hits fall on any way), every way compared without a branch on which one holds it. */
static inline bool array_has(Array *a, uint64_t k)
{
    if (a->sel != 8)
        return array_find(a, k) != NULL;
    const uint64_t *s = a->e + (k & a->set_mask) * 8;
    uint64_t m = 0;
#pragma GCC unroll 8
    for (unsigned i = 0; i < 8; i++)
        m |= (s[i] >> 1) ^ k ? 0 : 1;
    return m;
}

static inline uint64_t *array_mru(Array *a, uint64_t k)
{
    return a->e + (k & a->set_mask) * a->stride;
}

/* Key k is its set's most recently used entry: a read of it is a hit that
 * changes nothing (the common case, tested inline before any call). */
static inline bool array_is_mru(Array *a, uint64_t k)
{
    return (array_mru(a, k)[0] >> 1) == k;
}

/* Key k is its set's most recent entry, or the one after it (then the two
 * swap, what array_read does): a hit found with two compares, for the lean
 * leaf (mem_lean_body). Returns the set (k at its head), or NULL when the
 * full lookup is still to do. W: the array's ways when the caller knows them
 * (an array that is not split: its stride), 0 when not. */
static inline __attribute__((always_inline)) uint64_t *array_head2_w(Array *a, uint64_t k, const unsigned W)
{
    uint64_t *s = W ? a->e + (k & a->set_mask) * W : array_mru(a, k);
    if (LIKELY((s[0] >> 1) == k))
        return s;
    if ((W ? W < 2 : a->ways < 2) || (s[1] >> 1) != k)
        return NULL;
    uint64_t x = s[1];
    s[1] = s[0];
    s[0] = x;
    return s;
}

/* the same for an array of W ways, W known (not split: stride W), or W = 0: any */
static inline __attribute__((always_inline)) uint64_t *array_head2(Array *a, uint64_t k)
{
    return array_head2_w(a, k, 0);
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
    /* the line (page) of the last instruction fetch: the most recently used
     * of its set in the L1I (ITLB), so fetching it again is a hit that
     * changes nothing and needs no look at the array */
    uint64_t last_iline, last_ipage;
    /* the rep-prefixed string instruction executed last and insns after it (a repeat follows it at once) */
    uint64_t rep_pc, rep_mark;
    uint64_t ctx; /* ctx_switch=: the address space running (context.c), 0 before the first switch */

    /* SPARC register windows */
    uint64_t cansave, canrestore;

    /* progress audit (SPARC): the block executing now, how many of its
     * instructions are known to have completed, and a register-window
     * instruction that has started but is not yet known to have completed */
    const struct TBDesc *cur_tb;
    unsigned done;
    int pending;
    uint8_t pending_op;

    struct Timing *t;    /* core=ooo: the timeline (timing.c); NULL otherwise */
    const uint64_t *watch; /* core=ooo: the lines in flight or prefetched, by pft_index (timing.c) */
    uint64_t pf_mem_lat; /* the memory latency of the last prefetch fill that reached memory (caches.c) */
} VCpu;

extern VCpu *vcpus[MAX_VCPUS];
extern bool have_l2, have_l3, have_stlb;
/* every address is on the vCPU's own NUMA node (numa_nodes=1, or user mode
 * without numa_interleave=): node_of needs no look at the address */
extern bool numa_local;
extern uint64_t region_seq; /* regions begun so far, all vCPUs (atomic) */
/* System mode: caches are indexed by guest-physical address, except that
 * instruction fetches keep their virtual line (plugin API 1 gives no
 * physical address for a fetch); this bit keeps those lines apart from
 * data lines in the unified levels. */
#define ITAG (1ull << 62)
extern uint64_t itag;
static const bool have_itlb = true, have_dtlb = true;
extern unsigned l1i_shift, l1d_shift, l2_shift, l3_shift, page_shift;
extern uint64_t l1d_line_mask;
extern bool audit_faults;
extern bool system_mode;
/* fast_forward=1: false until some vCPU begins a region; until then every
 * callback returns at once (no counts, no cache or TLB state: they start cold
 * at the first region) */
extern bool modelling;
/* fast_forward=2: a vCPU models only while it has a region open; between
 * regions its callbacks return at once and its caches and TLBs keep the state
 * the last region left */
extern bool regions_only;
extern const char *target_name;
extern qemu_plugin_id_t plugin_id;
void register_callbacks(qemu_plugin_id_t id); /* vcpu_init, tb_trans, atexit */
extern FILE *trace_fp;

void tlb_access(VCpu *v, Array *t, uint64_t vpn, uint64_t *miss);
/* context.c: with ctx_switch=, an instruction whose load names the next address space, and its callback */
bool context_insn(const uint8_t *b, size_t n, uint64_t va, int64_t *simm);
void context_mem(unsigned int vi, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud);
/* ffreset.c: ff_reset=1 (system mode, fast_forward=2): until the first region
 * only the blocks holding a marker are instrumented (ff_marker_only), then a
 * plugin reset into the full instrumentation */
extern bool ff_marker_only;
int ffreset_install(void); /* after the options are validated; 0 or -1 (failed) */
bool ffreset_has_marker(const struct TBDesc *t);
void ffreset_tb_trans(struct qemu_plugin_tb *tb, size_t n);
void ffreset_request(unsigned vi);
/* physfetch.c: the address whose line an instruction fetch uses (its virtual one unless fetch_phys) */
uint64_t fetch_addr(const struct qemu_plugin_insn *insn, uint64_t vaddr);
void l1i_fetch_line(VCpu *v, uint64_t line);
void data_access_full(VCpu *v, uint64_t vaddr, uint64_t paddr, unsigned size, bool store, bool locked,
                      bool load_part);
void data_access_line(VCpu *v, uint64_t addr, bool store);
/* the same for the x86_64 machines' shape (caches.c: x86_shape, decided from the options) */
void data_access_line_x86(VCpu *v, uint64_t addr, bool store);
/* a DTLB of 4 ways and an L1D of 8 (neither is ever split: array_init) */
bool shape48(void);
/* shape48, and the x86_64 machines' STLB, L2 and split L3 */
bool x86_shape(void);


/* One data access of size bytes at vaddr (guest-physical paddr: the caches'
 * index in system mode; paddr == vaddr in user mode). The common case, an
 * aligned access (so in one line and one page) to the most recently used
 * page of its DTLB set and line of its L1D set, a load or a write-back
 * store, is a hit that changes nothing but a store's dirty bit: it is
 * counted here, with nothing looked up but two set heads; anything else
 * goes to data_access_full, which finds the same hits when it gets there. */
static inline void data_access(VCpu *v, uint64_t vaddr, uint64_t paddr, unsigned size, bool store, bool locked,
                 bool load_part)
{
    uint64_t line = paddr >> l1d_shift;
    uint64_t *mru = array_mru(&v->l1d, line);
    if (LIKELY(!locked && !(vaddr & (size - 1)) && !((vaddr ^ (vaddr + size - 1)) >> l1d_shift) &&
               (!store || !cfg.l1d_write) && (*mru >> 1) == line && array_is_mru(&v->dtlb, vaddr >> page_shift))) {
        v->c.lean[store]++; /* one DTLB access, a load or a store, an L1D hit */
        *mru |= store;
        return;
    }
    data_access_full(v, vaddr, paddr, size, store, locked, load_part);
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
extern const char *const trap_kind_name[];

struct TBDesc;

typedef struct InsnDesc {
    const struct TBDesc *tb;
    uint8_t special;
    uint8_t locked;
    uint8_t width;      /* SPARC: decoded access width (audited accesses) */
    uint8_t pf_strong;  /* prefetch: the instruction asks for a strong prefetch */
    uint8_t pf_known;   /* prefetch: address known at translation time */
    uint8_t tail;       /* counted and fetched by its own exec callback (see build_desc) */
    uint8_t rep;        /* x86: a rep-prefixed string instruction (QEMU executes it once per iteration) */
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
    uint64_t fetch0; /* fetch_phys: the first instruction's fetch address (deduplication) */
    uint8_t *isize;
    /* at most two runs of lines and one of pages (tb_exec_lean's common case):
     * the lines (iline2 = iline1 with one run), the page, and the L1I hits
     * and ITLB accesses the block counts when they are all hits */
    bool leaf;
    uint32_t leaf_ihits, leaf_iacc;
    uint64_t iline1, iline2, ipage1;
} TBDesc;

int sparc_trap_kind(unsigned tt);
void decode_x86(InsnDesc *d, const uint8_t *b, size_t n, uint64_t vaddr);
void decode_sparc(InsnDesc *d, const uint8_t *b, size_t n);
void decode_arm(InsnDesc *d, const uint8_t *b, size_t n);

/* ------------------------------------------------------------ traps */

void prefetch_exec(VCpu *v, const InsnDesc *d);
void audit_progress(VCpu *v, unsigned idx);
void tb_finalize(VCpu *v, uint64_t next_vaddr);

/* ------------------------------------------------------------ timing.c (core=ooo) */

typedef struct Timing Timing;
extern bool ooo_on;
/* the timeline's table of lines in flight or prefetched and not used: an L1D hit on any other line
 * changes nothing there (the memory callback asks VCpu.watch before it calls timing_access) */
#define PFT_BITS 10
#define PFT_MASK ((1u << PFT_BITS) - 1)
static inline unsigned pft_index(uint64_t line)
{
    return (unsigned)((line ^ (line >> PFT_BITS)) & PFT_MASK);
}
void timing_install(void);                  /* after the options are validated */
void timing_vcpu_init(VCpu *v);
void timing_guest_base(uint64_t haddr, uint64_t vaddr); /* user mode: where the guest's memory is */
/* after the cache model counted one data access (its counts before it in *before) */
void timing_access(VCpu *v, const InsnDesc *d, uint64_t vaddr, uint64_t paddr, unsigned size, bool store,
                   const AccessMark *before);
/* user mode: an L1D hit on a line VCpu.watch holds (the access counted; paddr = vaddr) */
void timing_hit(VCpu *v, const InsnDesc *d, uint64_t vaddr, unsigned size, bool store);
void timing_drain(VCpu *v, uint64_t insn);  /* a marker, the end: every outstanding access completes */
static inline void access_mark(const VCpu *v, AccessMark *m)
{
    m->misses = v->c.l1d_load_misses + v->c.l1d_store_misses;
    m->l2hit = v->c.l1d_rmiss_l2hit;
    m->l3hit = v->c.l1d_rmiss_l3hit;
    m->mem_cycles = v->c.mem_cycles_d;
    m->dtlb_misses = v->c.dtlb_misses;
    m->stlb_misses = v->c.stlb_misses;
}
/* caches.c: a hardware prefetch's fill of an L1D line (into the L1D) or of the L2 line holding an
 * L1D line (into the L2), not present there: the level that served it (2, 3, or 0 = memory, whose
 * latency is then in v->pf_mem_lat); counted apart from the demand accesses */
int pf_fill_l1d(VCpu *v, uint64_t line);
int pf_fill_l2(VCpu *v, uint64_t line);

/* ------------------------------------------------------------ output */

typedef struct {
    char *buf;
    size_t len, cap;
} Str;

void sput(Str *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void put_json_string(Str *s, const char *v);
void put_options(Str *s);
void region_close(VCpu *v, const Counters *now, uint8_t why);

/* ------------------------------------------------------------ contention.c (lockstep=on) */

int contention_install(qemu_plugin_id_t id); /* after the options are validated; 0 or -1 (failed) */
void contention_vcpu_init(unsigned vi);
void contention_tb_trans(struct qemu_plugin_tb *tb, const TBDesc *t);
void contention_put_stats(Str *s, const Counters *c, uint64_t wait, const char *ind);
void contention_put_run(Str *s);

void plugin_exit(qemu_plugin_id_t id, void *p);

#endif
