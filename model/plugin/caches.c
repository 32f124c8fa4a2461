/*
 * caches.c - the memory hierarchy of one vCPU: L1I, L1D, a unified L2 and an
 * optional L3 (set-associative LRU arrays, model.h), the ITLB, DTLB and an
 * optional second-level TLB, and NUMA memory (the latency matrix by node).
 * The data path (data_access: TLBs, unaligned and line-straddling accesses,
 * locked read-modify-writes, L1D and below) and the fetch path
 * (l1i_fetch_line) only count; cycles are computed from the counts at exit
 * (stats.c).
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "model.h"

#define HUGE_PAGE (2u << 20)
/* The miss walk's steps (l1d_read, lower_read, l3_read, the DTLB's
 * tlb_access) are inlined into their callers: as calls they cost a random
 * access that misses down to the L3 about 50 host instructions of calls and
 * saved registers (x86_64 -7 to -9%, sparc64 -11% in interleaved A/B runs): HOT (model.h). */
#define X86_L3_TAIL 16 /* x86_shape's L3: 20 ways, SPLIT_HEAD in the head */

static uint64_t *tags_alloc(uint64_t entries, unsigned set_bytes)
{
    uint64_t *e;
    size_t bytes = entries * sizeof(uint64_t);
    if (bytes >= HUGE_PAGE) {
        /* a large tag array (an L3) on 2 MiB pages: its random sets then
         * cost the host no TLB walk */
        bytes = (bytes + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
        e = aligned_alloc(HUGE_PAGE, bytes);
        if (e)
            madvise(e, bytes, MADV_HUGEPAGE);
    } else if (set_bytes % 64 == 0 || set_bytes == 32) {
        /* sets of whole host lines (8 ways) start on one, a split array's
         * head sets (4 ways) two to a line: no set straddles two lines */
        e = aligned_alloc(64, bytes);
    } else {
        e = malloc(bytes);
    }
    if (!e) {
        fprintf(stderr, "trapline-model: out of memory\n");
        abort();
    }
    for (uint64_t i = 0; i < entries; i++)
        e[i] = INVALID_TAG;
    return e;
}

void array_init(Array *a, uint64_t entries, uint64_t ways, unsigned shift)
{
    a->ways = (unsigned)ways;
    a->set_mask = entries / ways - 1;
    a->shift = shift;
    uint64_t sets = entries / ways;
    if (entries * sizeof(uint64_t) >= HUGE_PAGE && ways >= 4 * SPLIT_HEAD) { /* split (model.h) */
        a->stride = SPLIT_HEAD;
        a->sel = 0;
        a->e = tags_alloc(sets * SPLIT_HEAD, 32);
        a->t = tags_alloc(sets * (ways - SPLIT_HEAD), 0);
    } else {
        a->stride = a->sel = (unsigned)ways;
        a->e = tags_alloc(entries, ways == 4 ? 0 : (unsigned)ways * 8);
        a->t = NULL;
    }
}

/* The NUMA node holding addr (a guest-physical address in system mode). */
static inline unsigned node_of(const VCpu *v, uint64_t addr)
{
    if (LIKELY(numa_local)) /* one node, or user mode without interleave: decided at install */
        return v->node;
    if (addr & itag) /* an instruction fetch in system mode: taken as local */
        return v->node;
    if (cfg.numa_interleave)
        return (unsigned)((addr / cfg.numa_interleave) % cfg.numa_nodes);
    if (!system_mode || !cfg.numa_mem_n) /* user mode: the vCPU's own memory */
        return v->node;
    /* QEMU 7.2's qemu_plugin_hwaddr_phys_addr (plugins/api.c) returns the RAM
     * block's ram_addr offset + the offset in it + its memory region's address
     * (block->offset + offset + block->mr->addr). A node's memory backend
     * (-numa node,memdev=memN: one RAM block per node, created in node order
     * before any other) has both equal to the node's start, so node k's RAM
     * comes as [2 start_k, 2 start_k + size_k): node 0's as it is, node 1's
     * (256 MiB on the x86_64 guest) from 512 MiB. Taken as it was, node 1's
     * addresses fell above the memory described and were charged to the
     * reading vCPU's own node (an mbind to node 1 read from CPU 0 showed no
     * node-1 reads: ./run.sh simulate --guest, tests/test_36_simulate.py). */
    uint64_t start = 0;
    for (unsigned k = 0; k < cfg.numa_nodes; k++) {
        if (addr >= 2 * start && addr - 2 * start < cfg.numa_mem[k])
            return k;
        start += cfg.numa_mem[k];
    }
    return v->node; /* above the memory described (not RAM) */
}

/* A read that reached memory: charged numa_lat[vCPU node][memory node]. PF: a hardware prefetch's fill
 * (below), whose latency goes to v->pf_mem_lat instead. */
static inline HOT void mem_read_p(VCpu *v, uint64_t addr, bool ifetch, const int PF)
{
    unsigned k = node_of(v, addr);
    v->c.mem_reads[k]++;
    if (PF)
        v->pf_mem_lat += numa_lat_m[v->node][k];
    else if (ifetch)
        v->c.mem_cycles_i += numa_lat_m[v->node][k];
    else
        v->c.mem_cycles_d += numa_lat_m[v->node][k];
}

static inline HOT void mem_read(VCpu *v, uint64_t addr, bool ifetch)
{
    mem_read_p(v, addr, ifetch, 0);
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

/* An L3 read (an L2 miss, or the fill of an L2 write-allocate): 1 on a hit. PF: for a hardware
 * prefetch's fill, counted apart (the hwpf_l3_* counters). */
static inline HOT int l3_read_x(VCpu *v, uint64_t addr, const int X, const int PF)
{
    uint64_t victim = INVALID_TAG;
    if (array_read_c(&v->l3, addr >> l3_shift, &victim, X ? 0 : -1, X86_L3_TAIL)) {
        if (PF)
            v->c.hwpf_l3_hits++;
        else
            v->c.l3_read_hits++;
        return 1;
    }
    if (PF)
        v->c.hwpf_l3_misses++;
    else
        v->c.l3_read_misses++;
    if (victim != INVALID_TAG && (victim & 1)) {
        v->c.l3_writebacks++;
        mem_write(v, (victim >> 1) << l3_shift);
    }
    return 0;
}

static inline HOT int l3_read(VCpu *v, uint64_t addr)
{
    return l3_read_x(v, addr, 0, 0);
}

/* A dirty L2 victim is written to the L3, or to memory (l2_evicted tests it
 * inline: a clean victim, the common case, costs no call). */
static __attribute__((noinline)) void l2_evicted_dirty(VCpu *v, uint64_t victim)
{
    v->c.l2_writebacks++;
    if (have_l3)
        l3_write(v, (victim >> 1) << l2_shift);
    else
        mem_write(v, (victim >> 1) << l2_shift);
}

static inline HOT void l2_evicted(VCpu *v, uint64_t victim)
{
    if (victim != INVALID_TAG && (victim & 1))
        l2_evicted_dirty(v, victim);
}

/* A write into the L2 (an L1 write-back, or a write-through store): a miss
 * allocates the line, filled from the L3 (not charged: no load waits for
 * it), and then writes the L2's dirty victim to the L3. */
static inline void l2_write_p(VCpu *v, uint64_t addr, const int PF)
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
        l3_read_x(v, addr, 0, PF);
    l2_evicted(v, victim);
}

static inline void l2_write(VCpu *v, uint64_t addr)
{
    l2_write_p(v, addr, 0);
}

/* A read below the L1s (an L1 miss of the line at addr): returns the level
 * that served it, 2 (L2), 3 (L3) or 0 (memory). A dirty victim is written
 * to the level below after the fill (pycachesim's order). */
static inline HOT int lower_read_x(VCpu *v, uint64_t addr, bool ifetch, const int X, const int PF)
{
    uint64_t victim = INVALID_TAG;
    if (!X && !have_l2) {
        mem_read_p(v, addr, ifetch, PF);
        return 0;
    }
    if (array_read_c(&v->l2, addr >> l2_shift, &victim, X ? 8 : -1, 0)) {
        if (PF)
            v->c.hwpf_l2_hits++;
        else
            v->c.l2_read_hits++;
        return 2;
    }
    if (PF)
        v->c.hwpf_l2_misses++;
    else
        v->c.l2_read_misses++;
    /* a dirty victim goes to the L3 after the fill (l2_evicted): its L3 set,
     * like the fill's, is likely not in the host's caches, so it is fetched
     * now, in the shadow of the fill's lookup */
    if ((X || have_l3) && victim != INVALID_TAG && (victim & 1))
        __builtin_prefetch(array_mru_c(&v->l3, ((victim >> 1) << l2_shift) >> l3_shift, X ? 0 : -1));
    int lvl = 0;
    if ((X || have_l3) && l3_read_x(v, addr, X, PF))
        lvl = 3;
    else
        mem_read_p(v, addr, ifetch, PF);
    l2_evicted(v, victim);
    return lvl;
}

static inline HOT int lower_read(VCpu *v, uint64_t addr, bool ifetch)
{
    return lower_read_x(v, addr, ifetch, 0, 0);
}

static inline HOT void tlb_access_x(VCpu *v, Array *t, uint64_t vpn, uint64_t *miss, const int X)
{
    uint64_t victim;
    if (LIKELY(array_read_c(t, vpn, &victim, X ? 4 : -1, 0)))
        return;
    (*miss)++;
    if (X || have_stlb) {
        if (X ? array_read4_nb(array_mru_c(&v->stlb, vpn, 4), vpn, &victim, NULL, 0)
              : array_read_spread(&v->stlb, vpn, &victim))
            v->c.stlb_hits++;
        else
            v->c.stlb_misses++;
    }
}

static inline HOT void tlb_access_i(VCpu *v, Array *t, uint64_t vpn, uint64_t *miss)
{
    tlb_access_x(v, t, vpn, miss, 0);
}

void tlb_access(VCpu *v, Array *t, uint64_t vpn, uint64_t *miss) /* the other callers: a call */
{
    tlb_access_i(v, t, vpn, miss);
}

/* An L1D read of one line (a load, or the fill of a write-back store).
 * Returns 1 on a hit. */
static inline HOT int l1d_read_x(VCpu *v, uint64_t line, const int X)
{
    uint64_t victim = INVALID_TAG;
    if (LIKELY(array_read_c(&v->l1d, line, &victim, X ? 8 : -1, 0)))
        return 1;
    int lvl = lower_read_x(v, line << l1d_shift, false, X, 0);
    if (lvl == 2)
        v->c.l1d_rmiss_l2hit++;
    else if (lvl == 3)
        v->c.l1d_rmiss_l3hit++;
    if (victim != INVALID_TAG && (victim & 1)) {
        v->c.l1d_writebacks++;
        if (X || have_l2)
            l2_write(v, (victim >> 1) << l1d_shift);
        else
            mem_write(v, (victim >> 1) << l1d_shift);
    }
    return 0;
}

static inline HOT int l1d_read(VCpu *v, uint64_t line)
{
    return l1d_read_x(v, line, 0);
}

void l1i_fetch_line(VCpu *v, uint64_t line)
{
    uint64_t victim = INVALID_TAG;
    v->c.l1i_fetches += line != v->last_iline;
    v->last_iline = line;
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

/* data_access_full for an aligned access in one line (so one page), not
 * locked, a load or a write-back store, in user mode (address = index):
 * the same steps without the tests that cannot apply (mem_lean_slow). */
static inline HOT void data_access_line_x(VCpu *v, uint64_t addr, bool store, const int X)
{
    if (X || have_l3)
        __builtin_prefetch(array_mru_c(&v->l3, addr >> l3_shift, X ? 0 : -1));
    else if (have_l2)
        __builtin_prefetch(array_mru(&v->l2, addr >> l2_shift));
    uint64_t p = addr >> page_shift, l = addr >> l1d_shift;
    v->c.dtlb_accesses++;
    if (UNLIKELY((array_mru_c(&v->dtlb, p, X ? 4 : -1)[0] >> 1) != p))
        tlb_access_x(v, &v->dtlb, p, &v->c.dtlb_misses, X);
    uint64_t *mru = array_mru_c(&v->l1d, l, X ? 8 : -1);
    if (!store) {
        v->c.loads++;
        if (LIKELY((*mru >> 1) == l) || l1d_read_x(v, l, X))
            v->c.l1d_load_hits++;
        else
            v->c.l1d_load_misses++;
        return;
    }
    v->c.stores++;
    if (LIKELY((*mru >> 1) == l) || l1d_read_x(v, l, X))
        v->c.l1d_store_hits++;
    else
        v->c.l1d_store_misses++;
    *mru |= 1; /* the line is the set's most recent now */
}

__attribute__((noinline)) void data_access_line(VCpu *v, uint64_t addr, bool store)
{
    data_access_line_x(v, addr, store, 0);
}

/* The x86_64 machines' shape (x86-2012-server and its kin): a DTLB and an
 * STLB of 4 ways, an L1D and an L2 of 8 ways, an L3 of 20 ways split
 * (SPLIT_HEAD + X86_L3_TAIL). data_access_line_x86 walks it with every
 * array's kind and stride known (no switch in array_read, no have_l2/l3/stlb
 * tests): the same reads, the same counts. */
bool shape48(void)
{
    return cfg.dtlb_assoc == 4 && cfg.dtlb_entries >= 4 && cfg.l1d_assoc == 8 && cfg.l1d_size / cfg.l1d_line >= 8;
}

bool x86_shape(void)
{
    uint64_t l3_entries = cfg.l3_line ? cfg.l3_size / cfg.l3_line : 0;
    return shape48() && have_stlb && cfg.stlb_assoc == 4 && cfg.stlb_entries >= 4 && have_l2 &&
           cfg.l2_assoc == 8 && cfg.l2_size / cfg.l2_line >= 8 && have_l3 &&
           cfg.l3_assoc == SPLIT_HEAD + X86_L3_TAIL && l3_entries * sizeof(uint64_t) >= HUGE_PAGE &&
           cfg.l3_assoc >= 4 * SPLIT_HEAD; /* array_init splits it */
}

__attribute__((noinline)) void data_access_line_x86(VCpu *v, uint64_t addr, bool store)
{
    data_access_line_x(v, addr, store, 1);
}

/* Any data access (data_access in model.h takes the common case first). */
void data_access_full(VCpu *v, uint64_t vaddr, uint64_t paddr, unsigned size, bool store, bool locked,
                      bool load_part)
{
    uint64_t last = vaddr + size - 1;

    /* the last level's tag array is larger than the host's caches: its set is
     * fetched while the TLBs and the L1D are looked up (-20% time on an
     * L2-missing x86_64 workload, docs/model.md "Performance") */
    if (have_l3)
        __builtin_prefetch(array_mru(&v->l3, paddr >> l3_shift));
    else if (have_l2)
        __builtin_prefetch(array_mru(&v->l2, paddr >> l2_shift));
    if (have_dtlb) {
        uint64_t p0 = vaddr >> page_shift, p1 = last >> page_shift;
        v->c.dtlb_accesses++;
        if (UNLIKELY(!array_is_mru(&v->dtlb, p0)))
            tlb_access(v, &v->dtlb, p0, &v->c.dtlb_misses);
        if (UNLIKELY(p1 != p0)) {
            v->c.dtlb_accesses++;
            tlb_access(v, &v->dtlb, p1, &v->c.dtlb_misses);
        }
    }
    if (UNLIKELY(size > 1 && (vaddr & (size - 1)))) {
        int w = size > 8 ? 8 : (int)size;
        if (unaligned_pol[w] == POL_TRAP)
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
        if (LIKELY(!straddle)) { /* one line: its set's most recent one is a hit that changes nothing */
            if (LIKELY(array_is_mru(&v->l1d, l0)) || l1d_read(v, l0))
                v->c.l1d_load_hits++;
            else
                v->c.l1d_load_misses++;
            return;
        }
        for (uint64_t l = l0; l <= l1; l++) {
            if (l1d_read(v, l))
                v->c.l1d_load_hits++;
            else
                v->c.l1d_load_misses++;
        }
        return;
    }
    v->c.stores++;
    if (!cfg.l1d_write) {
        /* write-back, write-allocate: read for ownership, then write */
        if (LIKELY(!straddle)) {
            uint64_t *mru = array_mru(&v->l1d, l0);
            if (LIKELY((*mru >> 1) == l0) || l1d_read(v, l0))
                v->c.l1d_store_hits++;
            else
                v->c.l1d_store_misses++;
            *mru |= 1; /* the line is the set's most recent now */
            return;
        }
        for (uint64_t l = l0; l <= l1; l++) {
            if (l1d_read(v, l))
                v->c.l1d_store_hits++;
            else
                v->c.l1d_store_misses++;
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

/* ------------------------------------------------------------ hardware prefetch fills (timing.c) */

/* A prefetch's fill takes the same steps as a demand miss's (victims and write-backs included), its
 * lookups below counted apart from the demand accesses (PF = 1: hwpf_l2_*, hwpf_l3_*, and the memory
 * latency in v->pf_mem_lat), walked as the demand misses are: with the x86_64 machines' shape known at
 * compile time (X = 1, data_access_line_x86) or any (X = 0). */
static int pf_x86 = -1;

static inline HOT int pf_fill_l1d_x(VCpu *v, uint64_t line, const int X)
{
    uint64_t victim = INVALID_TAG;
    v->pf_mem_lat = 0;
    if (X) /* not there (the caller looked): inserted */
        array_insert_w(array_mru_c(&v->l1d, line, 8), 8, line, &victim);
    else
        array_read_c(&v->l1d, line, &victim, -1, 0);
    int lvl = lower_read_x(v, line << l1d_shift, false, X, 1);
    if (victim != INVALID_TAG && (victim & 1)) {
        v->c.l1d_writebacks++;
        if (X || have_l2)
            l2_write_p(v, (victim >> 1) << l1d_shift, 1);
        else
            mem_write(v, (victim >> 1) << l1d_shift);
    }
    return lvl;
}

static inline HOT int pf_fill_l2_x(VCpu *v, uint64_t line, const int X)
{
    uint64_t addr = line << l1d_shift, victim = INVALID_TAG;
    v->pf_mem_lat = 0;
    /* not there (the caller looked): inserted */
    if (X)
        array_insert_w(array_mru_c(&v->l2, addr >> l2_shift, 8), 8, addr >> l2_shift, &victim);
    else
        array_read_c(&v->l2, addr >> l2_shift, &victim, -1, 0);
    v->c.hwpf_l2_misses++;
    int lvl = 0;
    if ((X || have_l3) && l3_read_x(v, addr, X, 1))
        lvl = 3;
    else
        mem_read_p(v, addr, false, 1);
    l2_evicted(v, victim);
    return lvl;
}

int pf_fill_l1d(VCpu *v, uint64_t line)
{
    if (UNLIKELY(pf_x86 < 0))
        pf_x86 = x86_shape();
    return pf_x86 ? pf_fill_l1d_x(v, line, 1) : pf_fill_l1d_x(v, line, 0);
}

int pf_fill_l2(VCpu *v, uint64_t line)
{
    if (UNLIKELY(pf_x86 < 0))
        pf_x86 = x86_shape();
    return pf_x86 ? pf_fill_l2_x(v, line, 1) : pf_fill_l2_x(v, line, 0);
}
