/*
 * timing.c - time as an out-of-order core spends it on memory (core=ooo).
 *
 * With core=inorder (every SPARC and ARM machine) nothing here runs: each
 * L1D miss costs its whole latency, one at a time, as stats.c computes from
 * the counts. With core=ooo the data part of a region's cycles is what this
 * file charges instead: the cycles the core stalls waiting for memory, on a
 * timeline of its own.
 *
 * The timeline. Instruction n issues at T(n) = cpi x n + the serial cycles so
 * far (instruction fetch, TLB walks, locks, traps: stats.c's other parts) +
 * the stalls charged here. Nothing stalls at a miss itself:
 *  - a load that misses the L1D starts at T(n), or when an outstanding load
 *    whose value its address comes from completes (below), or when one of
 *    the level's MSHRs frees (l1d_mshrs: the line fill buffers; an L2 miss
 *    also takes one of l2_mshrs, an L3 miss one of l3_mshrs); it completes
 *    its latency later (the level that served it: l2_lat, l3_lat, or the
 *    NUMA latency of memory), and a line from memory no sooner than its
 *    channel can deliver it after the lines before it (mem_channels, each
 *    mem_width bytes x mem_rate transfers per cycle; lines spread over the
 *    channels by address);
 *  - the core stops when the window is full: when instruction n reaches
 *    rob instructions, or lq loads, past an outstanding load miss, it waits
 *    until that miss completes (the stall charged);
 *  - a store that misses takes an MSHR for its line (the read for
 *    ownership, issued at once: Intel's cores prefetch the RFO of a store
 *    in the store buffer) and commits in program order when its line is
 *    there; the core stops when sb stores are waiting behind an uncommitted
 *    one;
 *  - an access to a line still being filled (by a demand miss or a
 *    prefetch) completes with the fill (l1d_misses_in_flight);
 *  - at a region marker (and at exit) the core drains: every outstanding
 *    load and store completes first, as around gem5's m5 operations.
 *
 * Dependences. QEMU 7.2's plugin API cannot read registers, so which loads
 * feed an address is found from values: in user mode the plugin reads the
 * value each load returned (the guest's memory, at the host address QEMU
 * maps it to), and a load miss whose address lies within 4 KiB of a value
 * an outstanding load returned waits for that load (a pointer chase, a
 * list, a tree: the next address is the loaded pointer plus a field
 * offset), among the last PROD loads of 4 or 8 bytes that missed or met a
 * line in flight (an older one, still outstanding, holds nothing back). An
 * address computed from a loaded value in another way (an index scaled into
 * an array, a hash) is not seen as dependent. In system
 * mode the plugin cannot read guest memory, and every load miss waits for
 * the outstanding loads: the misses of a guest lane are serial, as with
 * core=inorder.
 *
 * Hardware prefetchers (per level, l1d_pf_* and l2_pf_*), trained as gem5's
 * are by default (a level's demand misses and its demand hits on lines it
 * prefetched), except the stream prefetcher, which sees every access reaching
 * its level (as Intel's L2 streamer watches every L1 request):
 *  - next-line (gem5's TaggedPrefetcher): the next N lines;
 *  - adjacent-line: the other line of the aligned pair (a miss only);
 *  - ip-stride (gem5's StridePrefetcher, its default table: 64 entries of 4
 *    ways, LRU here where gem5 replaces at random; a 3-bit confidence starting
 *    at 4, prefetching at 4 and above): per load PC, N prefetches at the
 *    stride once it repeats, `distance` strides ahead;
 *  - stream: per page, the direction of the accesses; each access of a
 *    stream prefetches up to N lines beyond the furthest prefetched, at most
 *    `distance` lines ahead of the access.
 * A prefetch is dropped when its line is already in the level or being
 * filled, when it would leave the page (page_bounded), when every MSHR of its
 * level is busy, and when it misses the level below too and every MSHR there
 * is busy (demand misses first); it takes an MSHR of its level, fills the
 * line there (and the levels below, counted apart from demand accesses) and
 * is useful when a demand access uses the line before it is replaced.
 *
 * Times here are in 1/256 cycles (Q8).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define Q 8
#define Q1 (1ull << Q)

bool ooo_on;
static uint64_t cpi_q8, lat_q8[5];       /* by level served: [1] L1, [2] L2, [3] L3 */
static uint64_t cpi_inv;                 /* ceil(2^64 / cpi_q8) where per_cpi divides by multiplying */
static uint64_t xfer_q8;                 /* one line over one channel */
static uint64_t path_q8[2];              /* one line over the L2's fill path [0] (to the L1s) and the L3's [1] */
static uint64_t page_lines_shift;        /* page_shift - l1d_shift */
static unsigned n_fb, n_sq, n_l3q;
static uint64_t guest_base;              /* user mode: host address = guest address + guest_base */
static bool values_known;                /* user mode: loaded values can be read */

/* The queues hold as many as their options allow (0 MSHRs: the most), so a value in an option's range
 * is never cut short here: the window's outstanding load misses (rob), the store buffer (sb) and each
 * level's MSHRs (a ring: a power of two) */
#define ROBQ OPT_MAX_rob
#define SBQ OPT_MAX_sb
#define MAX_SLOTS OPT_MAX_l1d_mshrs
_Static_assert(OPT_MAX_l2_mshrs <= MAX_SLOTS && OPT_MAX_l3_mshrs <= MAX_SLOTS && !(MAX_SLOTS & (MAX_SLOTS - 1)),
               "the MSHR rings hold every level's most");
#define PROD 32
#define PROD_PAGES 4096 /* the filter of the pages of the values loaded (depends) */
#define MAX_CHAN OPT_MAX_mem_channels
#define STRIDE_SETS 16
#define STRIDE_WAYS 4

enum { PF_NONE, PF_L1, PF_L2 };

/* the lines in flight or prefetched (which line an entry holds: VCpu.watch, model.h) */
typedef struct {
    uint64_t done;      /* Q8: the fill completes */
    uint64_t insn_done; /* the instruction count by which it completes, were nothing to stall */
    uint8_t pf;         /* PF_L1 / PF_L2: prefetched into that level and not used yet */
} Pft;

typedef struct {
    uint64_t pc, last, tick;
    int64_t stride;
    int conf;
    bool valid;
} StrideE;

typedef struct {
    int64_t last, frontier; /* line numbers */
    int dir;
} StreamE;

/* A stream prefetcher's table: the pages (UINT64_MAX: a free entry) apart from the rest, a count of
 * its pages by a hash (a page whose count is 0 is not there: no scan), and the entries in recency
 * order, a list (head: the most recently used; tail: the next victim, free entries first, the
 * last first) */
#define STREAM_HASH 4096
typedef struct {
    uint64_t *page;
    uint16_t *prev, *next, head, tail;
    uint16_t cnt[STREAM_HASH];
    uint16_t at[STREAM_HASH]; /* the entry a page of this hash was last found in or put in */
    StreamE *e;
} Streams;

static inline unsigned stream_hash(uint64_t page)
{
    return (unsigned)((page ^ (page >> 12)) & (STREAM_HASH - 1));
}

/* A fill path (the L2's to the L1s, the L3's to the L2): the ends of the last transfers it carries, in
 * ascending order; a line takes path_q8 and no two overlap. Fills end in any order (an L2 hit after a
 * memory fill it overtakes), so a new one takes the first gap that fits at or after its own end; the
 * earliest end leaves when PATH_SLOTS are held. A transfer ends when its fill's MSHR frees, so the
 * path holds as many as a level's MSHRs can be (32 let lines cross faster than the path allows with
 * more than 32 fill buffers) */
#define PATH_SLOTS MAX_SLOTS
typedef struct {
    uint64_t end[2 * PATH_SLOTS]; /* the ends held: end[b .. b + n), moved down when they reach the top */
    unsigned b, n;
} Path;

/* The MSHRs of a level: when each frees, in ascending order in a ring (h[b]: the one that frees first;
 * times mostly come in order, so a new one mostly goes at the end) */
#define POOL_MASK (MAX_SLOTS - 1)
typedef struct {
    uint64_t h[MAX_SLOTS];
    unsigned b, n;
} Pool;

/* when the pool's first MSHR frees */
static inline uint64_t pool_min(const Pool *p)
{
    return p->h[p->b];
}

struct Timing {
    uint64_t now_q8;                 /* T at the last event */
    Pool fb, sq, l3q;                /* the L1D's (line fill buffers), the L2's and the L3's MSHRs */
    uint64_t chan[MAX_CHAN];
    Path path[2];                    /* the L2's fill path (to this core's L1s), the L3's (to its L2) */
    struct { uint64_t insn, load, done; } rob[ROBQ];
    unsigned rob_head, rob_n;
    struct { uint64_t store, commit; } sbq[SBQ];
    unsigned sb_head, sb_n;
    uint64_t last_commit;
    uint64_t prod_value[PROD], prod_done[PROD]; /* the last PROD loads that missed: what each returned, when */
    uint64_t prod_latest;                       /* the latest of prod_done */
    uint8_t prod_pages[PROD_PAGES];             /* how many of prod_value lie in each page (mod PROD_PAGES) */
    unsigned prod_i;
    uint64_t latest;                 /* the latest completion handed out (drain) */
    Pft pft[1u << PFT_BITS];
    uint64_t pft_line[1u << PFT_BITS]; /* the line of each (VCpu.watch: the memory callback reads it) */
    StrideE stride[2][STRIDE_SETS][STRIDE_WAYS];
    Streams stream[2];
    uint64_t tick;
    uint64_t cur_pc; /* the PC of the demand access being modelled (the stride prefetchers) */
    uint64_t demand_until; /* when the last line a demand access waits for arrives (misses_overlapped) */
};

/* ------------------------------------------------------------ set-up */

void timing_install(void)
{
    ooo_on = cfg.core == 1;
    if (!ooo_on)
        return;
    cpi_q8 = (uint64_t)llround(cfg.cpi * Q1);
    path_q8[0] = cfg.l2_fill_width ? ((uint64_t)cfg.l1d_line << Q) / cfg.l2_fill_width : 0;
    path_q8[1] = cfg.l3_fill_width && have_l3 ? ((uint64_t)cfg.l1d_line << Q) / cfg.l3_fill_width : 0;
    cpi_inv = cpi_q8 >= 2 && cpi_q8 < (1u << 16) ? (uint64_t)(((__uint128_t)1 << 64) / cpi_q8) + 1 : 0;
    lat_q8[1] = cfg.l1d_lat << Q;
    lat_q8[2] = cfg.l2_lat << Q;
    lat_q8[3] = cfg.l3_lat << Q;
    n_fb = (unsigned)(cfg.l1d_mshrs ? cfg.l1d_mshrs : MAX_SLOTS);
    n_sq = (unsigned)(cfg.l2_mshrs ? cfg.l2_mshrs : MAX_SLOTS);
    n_l3q = (unsigned)(cfg.l3_mshrs ? cfg.l3_mshrs : MAX_SLOTS); /* each at most MAX_SLOTS: options.def's range */
    if (cfg.mem_channels)
        xfer_q8 = (uint64_t)llround((double)cfg.l1d_line / ((double)cfg.mem_width * cfg.mem_rate) * Q1);
    page_lines_shift = page_shift > l1d_shift ? page_shift - l1d_shift : 0;
    values_known = !system_mode;
}

/* user mode: the host address of guest address 0 (an instruction's host
 * address minus its guest address; QEMU maps the guest's memory in one
 * piece, linux-user's g2h) */
void timing_guest_base(uint64_t haddr, uint64_t vaddr)
{
    if (ooo_on && !system_mode && haddr && !guest_base)
        guest_base = haddr - vaddr;
}

void timing_vcpu_init(VCpu *v)
{
    if (!ooo_on || v->t)
        return;
    Timing *t = calloc(1, sizeof *t);
    if (!t)
        abort();
    for (unsigned i = 0; i < (1u << PFT_BITS); i++)
        t->pft_line[i] = INVALID_TAG;
    v->watch = t->pft_line;
    t->fb.n = n_fb;
    t->sq.n = n_sq;
    t->l3q.n = n_l3q;
    for (int l = 0; l < 2; l++) {
        uint64_t n = l ? cfg.l2_pf_streams : cfg.l1d_pf_streams;
        Streams *st = &t->stream[l];
        uint64_t m = n ? n : 1;
        st->page = malloc(m * sizeof *st->page);
        st->prev = malloc(m * sizeof *st->prev);
        st->next = malloc(m * sizeof *st->next);
        st->e = calloc(m, sizeof *st->e);
        if (!st->page || !st->prev || !st->next || !st->e)
            abort();
        for (uint64_t i = 0; i < m; i++) {
            st->page[i] = UINT64_MAX;
            st->prev[i] = (uint16_t)(i - 1);
            st->next[i] = (uint16_t)(i + 1);
        }
        st->head = 0;
        st->tail = (uint16_t)(m - 1);
    }
    v->t = t;
}

/* ------------------------------------------------------------ the clock */

/* The cycles (Q8) of everything but the instructions and the data stalls (stats.c) */
static inline uint64_t serial_q8(const Counters *c)
{
    return counters_serial(c) << Q;
}

/* The instruction an access belongs to: the block's count is taken at its entry, less the instructions
 * after this one (none where the entry was not counted: the block a region starts in, under
 * fast_forward=2, is counted by the region's start) */
static inline uint64_t insns_at(const VCpu *v, const InsnDesc *d)
{
    uint64_t after = d ? d->n_after : 0;
    return v->c.insns > after ? v->c.insns - after : 0;
}

static uint64_t clock_at(VCpu *v, uint64_t insn)
{
    uint64_t t = cpi_q8 * insn + serial_q8(&v->c) + v->c.ooo_stall_q8;
    if (t < v->t->now_q8) /* never backwards (a block counted at its entry) */
        t = v->t->now_q8;
    v->t->now_q8 = t;
    return t;
}

static inline void stall(VCpu *v, uint64_t *now, uint64_t until)
{
    if (until > *now) {
        v->c.ooo_stall_q8 += until - *now;
        *now = until;
        v->t->now_q8 = until;
    }
}

/* The window: outstanding load misses the core has gone rob instructions or
 * lq loads past stall it until they complete; completed ones leave. Store
 * misses sb stores back hold it until they commit. */
static void retire(VCpu *v, uint64_t insn, uint64_t loads, uint64_t stores, uint64_t *now)
{
    Timing *t = v->t;
    while (t->rob_n) {
        unsigned h = t->rob_head;
        if (t->rob[h].done <= *now) {
            t->rob_head = (h + 1) % ROBQ;
            t->rob_n--;
            continue;
        }
        bool by_rob = insn >= t->rob[h].insn + cfg.rob;
        bool by_lq = cfg.lq && loads >= t->rob[h].load + cfg.lq;
        if (!by_rob && !by_lq && t->rob_n < ROBQ)
            break;
        /* it blocked when the core reached rob instructions past it (its time
         * taken back from now at cpi per instruction), or now */
        uint64_t at = *now;
        if (by_rob) {
            uint64_t back = cpi_q8 * (insn - (t->rob[h].insn + cfg.rob));
            at = back < *now ? *now - back : 0;
        }
        if (t->rob[h].done > at) {
            uint64_t s = t->rob[h].done - at;
            v->c.ooo_stall_q8 += s;
            *now += s;
            t->now_q8 = *now;
        }
        t->rob_head = (h + 1) % ROBQ;
        t->rob_n--;
    }
    while (t->sb_n) {
        unsigned h = t->sb_head;
        if (t->sbq[h].commit <= *now) {
            t->sb_head = (h + 1) % SBQ;
            t->sb_n--;
            continue;
        }
        if (!(cfg.sb && stores >= t->sbq[h].store + cfg.sb) && t->sb_n < SBQ)
            break;
        stall(v, now, t->sbq[h].commit);
        t->sb_head = (h + 1) % SBQ;
        t->sb_n--;
    }
}

/* The MSHR that frees first is taken until `done` (a request starts no earlier than it frees, so done
 * is not below it): the first leaves the ring, done goes in after the times at or below it. */
static inline void pool_take(Pool *p, uint64_t done)
{
    unsigned b = (p->b + 1) & POOL_MASK, k = p->n - 1;
    while (k && p->h[(b + k - 1) & POOL_MASK] > done) {
        p->h[(b + k) & POOL_MASK] = p->h[(b + k - 1) & POOL_MASK];
        k--;
    }
    p->h[(b + k) & POOL_MASK] = done;
    p->b = b;
}

/* The end of a transfer of q (Q8) over path p that would end at `done` were the path free: the first end
 * at or after it whose transfer overlaps none of the ones the path holds. One pass over the ends in
 * ascending order finds it (a transfer moved past one end can only meet later ones). `horizon`: no
 * fill from now on ends before it (the clock plus the path's shortest latency). */
static inline __attribute__((always_inline)) uint64_t path_take(Path *p, uint64_t q, uint64_t done, uint64_t horizon)
{
    /* the transfers that end by `horizon` - q leave: no fill from now on ends before horizon, so none
     * can meet them */
    uint64_t *e = p->end + p->b;
    unsigned n = p->n;
    while (n && e[0] + q <= horizon) {
        e++;
        n--;
    }
    /* the first gap at or after done: the ends it is past, then the ones it meets (each moves it to
     * that end: the ends held are q apart or more, so it meets them in a row), then none; done goes in
     * at k, after the ends below it. The ends it meets or precedes are the last ones (ascending), found
     * from the top: a fill mostly ends among the latest (a path kept busy by a stream holds about as
     * many ends as it has slots, nearly all before the new one) */
    unsigned k = n;
    if (n && done < e[n - 1] + q) { /* not after every transfer held */
        k = n - 1;
        while (k && e[k - 1] + q > done)
            k--;
        while (k < n && e[k] < done + q)
            done = e[k++] + q;
    }
    if (n == PATH_SLOTS) { /* the earliest end leaves */
        e++;
        n--;
        k -= k > 0;
    }
    if (e + n == p->end + 2 * PATH_SLOTS) { /* at the top: moved down */
        memmove(p->end, e, n * sizeof e[0]);
        e = p->end;
    }
    for (unsigned m = n; m > k; m--)
        e[m] = e[m - 1];
    e[k] = done;
    p->b = (unsigned)(e - p->end);
    p->n = n + 1;
    return done;
}

/* A fill of `line` from level lvl (2, 3, 4 = memory with latency mem_q8)
 * asked for at `start`: the MSHRs it takes, the channel; returns when the
 * line is there. l1: it takes an L1D MSHR too (a demand miss, an L1
 * prefetch). */
static inline __attribute__((always_inline)) uint64_t fill(VCpu *v, uint64_t line, int lvl, uint64_t mem_q8, uint64_t *startp, bool l1, uint64_t not_before)
{
    uint64_t start = *startp;
    Timing *t = v->t;
    if (l1 && pool_min(&t->fb) > start)
        start = pool_min(&t->fb);
    if (lvl >= 3 && pool_min(&t->sq) > start)
        start = pool_min(&t->sq);
    if (lvl >= 4 && have_l3 && pool_min(&t->l3q) > start)
        start = pool_min(&t->l3q);
    *startp = start; /* when it leaves: its MSHRs were free */
    uint64_t done = start + (lvl >= 4 ? mem_q8 : lat_q8[lvl]);
    if (lvl >= 4 && cfg.mem_channels) {
        uint64_t *ch = &t->chan[line % cfg.mem_channels];
        if (*ch + xfer_q8 > done)
            done = *ch + xfer_q8;
        *ch = done;
    }
    if (done < not_before)
        done = not_before;
    /* the line crosses the L3's fill path (from the L3 or memory into the L2), then the L2's (into the L1) */
    if (lvl >= 3 && path_q8[1])
        done = path_take(&t->path[1], path_q8[1], done, t->now_q8 + lat_q8[3]);
    if (l1 && lvl >= 2 && path_q8[0])
        done = path_take(&t->path[0], path_q8[0], done, t->now_q8 + lat_q8[2]);
    if (l1)
        pool_take(&t->fb, done);
    if (lvl >= 3)
        pool_take(&t->sq, done);
    if (lvl >= 4 && have_l3)
        pool_take(&t->l3q, done);
    if (done > t->latest)
        t->latest = done;
    return done;
}

/* n / cpi_q8, rounded down: a multiply by cpi_inv where that is exact (Granlund and Montgomery: a
 * divisor below 2^16 and n below 2^48), else the division */
static inline uint64_t per_cpi(uint64_t n)
{
    if (cpi_inv && n < (1ull << 48))
        return (uint64_t)(((__uint128_t)n * cpi_inv) >> 64);
    return n / cpi_q8;
}

static inline Pft *pft_of(Timing *t, uint64_t line)
{
    return &t->pft[pft_index(line)];
}

/* the line held by the entry of `line` (pft_of's: the same index, not a pointer difference, which
 * divides by the entry's 24 bytes) */
static inline uint64_t *pft_line(Timing *t, uint64_t line)
{
    return &t->pft_line[pft_index(line)];
}

static inline __attribute__((always_inline)) void pft_put(VCpu *v, uint64_t line, uint64_t done, uint64_t now, uint64_t insn, uint8_t pf)
{
    Pft *e = pft_of(v->t, line);
    *pft_line(v->t, line) = line;
    e->done = done;
    e->insn_done = insn + (cpi_q8 ? (done > now ? per_cpi(done - now + cpi_q8 - 1) : 0) : 0) + 1;
    e->pf = pf;
}

/* ------------------------------------------------------------ prefetchers */

static __attribute__((noinline)) void prefetch_l1(VCpu *v, uint64_t line, uint64_t now, uint64_t insn);
static __attribute__((noinline)) void prefetch_l2(VCpu *v, uint64_t line, uint64_t now, uint64_t insn);
static inline void l2_access(VCpu *v, uint64_t line, uint64_t now, uint64_t insn, bool miss, bool pf_hit);

/* a prefetch into level lvl (1 or 2, a constant where it is asked for: each level's prefetch is a function of
 * its own, every choice between the levels made when it is compiled) */
static inline HOT void prefetch_line(VCpu *v, int into, uint64_t line, uint64_t now, uint64_t insn)
{
    if (into == 1)
        prefetch_l1(v, line, now, insn);
    else
        prefetch_l2(v, line, now, insn);
}

static inline bool same_page(uint64_t a, uint64_t b)
{
    return (a >> page_lines_shift) == (b >> page_lines_shift);
}

/* The level below a prefetch into level `into` has every MSHR busy at `now` and would miss its line */
static inline bool below_busy(VCpu *v, int into, uint64_t line, uint64_t now)
{
    Timing *t = v->t;
    if (into == 1)
        return have_l2 && pool_min(&t->sq) > now && !array_has(&v->l2, (line << l1d_shift) >> l2_shift);
    return have_l3 && pool_min(&t->l3q) > now && !array_has(&v->l3, (line << l1d_shift) >> l3_shift);
}

/* One prefetch of `line` into level `into` (1: L1D, 2: L2) at time now. */
static inline HOT void prefetch_line_x(VCpu *v, const int into, uint64_t line, uint64_t now, uint64_t insn)
{
    Timing *t = v->t;
    Pft *e = pft_of(t, line);
    bool filling = *pft_line(t, line) == line && insn < e->insn_done;
    if (filling && (into == 2 || e->pf != PF_L2))
        return; /* being filled into this level */
    /* an L1D prefetch of a line on its way to the L2 comes with that fill */
    uint64_t not_before = filling ? e->done + lat_q8[2] - lat_q8[1] : 0;
    int lvl;
    if (into == 1 ? array_has(&v->l1d, line) : !have_l2 || array_has(&v->l2, (line << l1d_shift) >> l2_shift))
        return;
    /* demand misses come first: a prefetch goes only when one of its level's MSHRs is free, and one of the
     * level below's when it misses there too (gem5's caches send a queued prefetch only when an MSHR is free
     * and no demand miss waits to be sent, and a cache whose MSHRs are all busy takes no miss) */
    if (pool_min(into == 1 ? &t->fb : &t->sq) > now || below_busy(v, into, line, now)) {
        v->c.hwpf_dropped++;
        return;
    }
    lvl = into == 1 ? pf_fill_l1d(v, line) : pf_fill_l2(v, line);
    uint64_t mem_q8 = lvl == 0 ? (uint64_t)v->pf_mem_lat << Q : 0;
    uint64_t start = now;
    uint64_t done = fill(v, line, lvl == 0 ? 4 : lvl, mem_q8, &start, into == 1, not_before);
    v->c.hwpf_issued[into - 1]++;
    pft_put(v, line, done, now, insn, into == 1 ? PF_L1 : PF_L2);
    if (into == 1 && have_l2) /* the L1's prefetch is an access of the L2 */
        l2_access(v, line, now, insn, lvl != 2, false);
}

static inline HOT void next_line(VCpu *v, const int lvl, uint64_t line, uint64_t now, uint64_t insn, uint64_t degree, bool page)
{
    for (uint64_t k = 1; k <= degree; k++) {
        if (page && !same_page(line, line + k))
            break;
        prefetch_line(v, lvl, line + k, now, insn);
    }
}

/* gem5's StridePrefetcher (src/mem/cache/prefetch/stride.cc), its default table; on physical addresses
 * as gem5's (use_virtual_addresses false), so that its lines are the caches' */
static inline HOT void ip_stride(VCpu *v, const int lvl, uint64_t pc, uint64_t addr, uint64_t now, uint64_t insn)
{
    Timing *t = v->t;
    uint64_t degree = lvl == 1 ? cfg.l1d_pf_stride : cfg.l2_pf_stride;
    uint64_t dist = lvl == 1 ? cfg.l1d_pf_stride_dist : cfg.l2_pf_stride_dist;
    bool page = lvl == 1 ? cfg.l1d_pf_stride_page : cfg.l2_pf_stride_page;
    StrideE *set = t->stride[lvl - 1][(pc ^ (pc >> 4)) % STRIDE_SETS];
    StrideE *e = NULL;
    for (int i = 0; i < STRIDE_WAYS; i++)
        if (set[i].valid && set[i].pc == pc)
            e = &set[i];
    t->tick++;
    if (!e) {
        StrideE *victim = &set[0];
        for (int i = 0; i < STRIDE_WAYS; i++)
            if (!set[i].valid || set[i].tick < victim->tick)
                victim = &set[i];
        victim->valid = true;
        victim->pc = pc;
        victim->last = addr;
        victim->stride = 0;
        victim->conf = 4;
        victim->tick = t->tick;
        return;
    }
    e->tick = t->tick;
    int64_t s = (int64_t)(addr - e->last);
    if (s == e->stride && s != 0) {
        if (e->conf < 7)
            e->conf++;
    } else {
        if (e->conf > 0)
            e->conf--;
        if (e->conf < 4) /* below 50% of 7 */
            e->stride = s;
    }
    e->last = addr;
    if (e->conf < 4)
        return;
    int64_t ps = s;
    int64_t blk = (int64_t)cfg.l1d_line;
    if (ps < blk && ps > -blk)
        ps = ps < 0 ? -blk : blk;
    uint64_t a = addr + (uint64_t)((int64_t)dist * ps);
    uint64_t here = addr >> l1d_shift;
    for (uint64_t k = 1; k <= degree; k++) {
        a += (uint64_t)ps;
        uint64_t line = a >> l1d_shift;
        if (page && !same_page(here, line))
            break;
        prefetch_line(v, lvl, line, now, insn);
    }
}

/* entry i becomes the most recently used */
static inline void stream_touch(Streams *st, uint16_t i)
{
    if (st->head == i)
        return;
    uint16_t p = st->prev[i], x = st->next[i];
    st->next[p] = x;
    if (st->tail == i)
        st->tail = p;
    else
        st->prev[x] = p;
    st->next[i] = st->head;
    st->prev[st->head] = i;
    st->head = i;
}

static inline HOT void stream(VCpu *v, const int lvl, uint64_t line, uint64_t now, uint64_t insn)
{
    Timing *t = v->t;
    uint64_t degree = lvl == 1 ? cfg.l1d_pf_stream : cfg.l2_pf_stream;
    int64_t dist = (int64_t)(lvl == 1 ? cfg.l1d_pf_stream_dist : cfg.l2_pf_stream_dist);
    uint64_t n = lvl == 1 ? cfg.l1d_pf_streams : cfg.l2_pf_streams;
    bool page = lvl == 1 ? cfg.l1d_pf_stream_page : cfg.l2_pf_stream_page;
    Streams *st = &t->stream[lvl - 1];
    uint64_t pg = line >> page_lines_shift, i = n;
    unsigned h = stream_hash(pg);
    if (st->cnt[h]) {
        /* where this hash's page was last: there, or (when this hash has one page, and that is it)
         * not in the table; else a scan */
        uint64_t a = st->at[h];
        if (st->page[a] == pg)
            i = a;
        else if (st->cnt[h] > 1 || stream_hash(st->page[a]) != h) {
            for (i = 0; i < n && st->page[i] != pg; i++)
                ;
            if (i < n)
                st->at[h] = (uint16_t)i;
        }
    }
    if (i == n) { /* a new stream: the last free entry, or else the least recently used */
        i = st->tail;
        if (st->page[i] != UINT64_MAX)
            st->cnt[stream_hash(st->page[i])]--;
        st->cnt[h]++;
        st->at[h] = (uint16_t)i;
        st->page[i] = pg;
        stream_touch(st, (uint16_t)i);
        st->e[i] = (StreamE){.last = (int64_t)line, .frontier = (int64_t)line, .dir = 0};
        return;
    }
    stream_touch(st, (uint16_t)i);
    StreamE *e = &st->e[i];
    int64_t L = (int64_t)line, d = L - e->last;
    if (d == 0)
        return;
    int dir = d > 0 ? 1 : -1;
    e->last = L;
    if (dir != e->dir) { /* a stream once two steps in a row go one way: none yet */
        e->dir = dir;
        e->frontier = L;
        return;
    }
    if ((e->frontier - L) * dir < 0)
        e->frontier = L;
    for (uint64_t k = 0; k < degree; k++) {
        int64_t x = e->frontier + dir;
        if ((x - L) * dir > dist || x < 0)
            break;
        if (page && !same_page(line, (uint64_t)x))
            break;
        prefetch_line(v, lvl, (uint64_t)x, now, insn);
        e->frontier = x;
    }
}

/* The prefetchers of a level, told of an access: a demand miss (miss), a
 * demand hit on a line the level prefetched (pf_hit), or any other access
 * (the stream prefetcher alone hears those). */
static inline HOT void train(VCpu *v, const int lvl, uint64_t line, uint64_t pc, uint64_t addr, uint64_t now, uint64_t insn, bool miss,
                  bool pf_hit)
{
    bool l1 = lvl == 1;
    if (miss || pf_hit) {
        uint64_t nl = l1 ? cfg.l1d_pf_next : cfg.l2_pf_next;
        if (nl)
            next_line(v, lvl, line, now, insn, nl, l1 ? cfg.l1d_pf_next_page : cfg.l2_pf_next_page);
        if ((l1 ? cfg.l1d_pf_stride : cfg.l2_pf_stride) && pc)
            ip_stride(v, lvl, pc, addr, now, insn);
    }
    if (miss && (l1 ? cfg.l1d_pf_adj : cfg.l2_pf_adj))
        prefetch_line(v, lvl, line ^ 1, now, insn);
    if (l1 ? cfg.l1d_pf_stream : cfg.l2_pf_stream)
        stream(v, lvl, line, now, insn);
}

static inline HOT void l2_access(VCpu *v, uint64_t line, uint64_t now, uint64_t insn, bool miss, bool pf_hit)
{
    if (cfg.l2_pf_next || cfg.l2_pf_adj || cfg.l2_pf_stride || cfg.l2_pf_stream)
        train(v, 2, line, v->t->cur_pc, line << l1d_shift, now, insn, miss, pf_hit);
}

static __attribute__((noinline)) void prefetch_l1(VCpu *v, uint64_t line, uint64_t now, uint64_t insn)
{
    prefetch_line_x(v, 1, line, now, insn);
}

static __attribute__((noinline)) void prefetch_l2(VCpu *v, uint64_t line, uint64_t now, uint64_t insn)
{
    prefetch_line_x(v, 2, line, now, insn);
}

/* ------------------------------------------------------------ accesses */

/* A demand access to a line not in the L1D and not yet missed by an earlier demand access (a miss, or
 * the first demand access of a line a prefetch is still filling): misses_overlapped when another such
 * access is still waiting for its line (the demand misses in flight; gem5's overlap-stats counts the
 * same from its L1D's Miss and Fill probes). */
static inline void primary_miss(VCpu *v, uint64_t start, uint64_t done)
{
    Timing *t = v->t;
    if (t->demand_until > start)
        v->c.misses_overlapped++;
    if (done > t->demand_until)
        t->demand_until = done;
}

static inline uint64_t loaded_value(uint64_t vaddr, unsigned size)
{
    uint64_t x = 0;
    const void *p = (const void *)(uintptr_t)(vaddr + guest_base);
    if (size == 8) {
        memcpy(&x, p, 8);
        if (cfg.arch == ARCH_SPARC64)
            x = __builtin_bswap64(x);
    } else {
        uint32_t y;
        memcpy(&y, p, 4);
        x = cfg.arch == ARCH_SPARC64 ? __builtin_bswap32(y) : y;
    }
    return x;
}

static inline void producer(VCpu *v, uint64_t vaddr, unsigned size, uint64_t done)
{
    if (!values_known || (size != 8 && size != 4))
        return;
    Timing *t = v->t;
    uint64_t value = loaded_value(vaddr, size);
    if (t->prod_done[t->prod_i]) /* the entry replaced */
        t->prod_pages[(t->prod_value[t->prod_i] >> 12) & (PROD_PAGES - 1)]--;
    t->prod_pages[(value >> 12) & (PROD_PAGES - 1)]++;
    t->prod_value[t->prod_i] = value;
    t->prod_done[t->prod_i] = done;
    t->prod_i = (t->prod_i + 1) % PROD;
    if (done > t->prod_latest)
        t->prod_latest = done;
}

/* when the loads an address depends on complete (0 if none is outstanding) */
static uint64_t depends(VCpu *v, uint64_t vaddr, uint64_t now)
{
    Timing *t = v->t;
    uint64_t dep = 0;
    if (!values_known) { /* system mode: every outstanding load */
        for (unsigned i = 0, h = t->rob_head; i < t->rob_n; i++, h = (h + 1) % ROBQ)
            if (t->rob[h].done > dep)
                dep = t->rob[h].done;
        return dep > now ? dep : 0;
    }
    if (t->prod_latest <= now) /* none is outstanding */
        return 0;
    /* a value within 4 KiB of vaddr lies in its page or one beside it: none there, none near */
    uint64_t pg = vaddr >> 12;
    if (!(t->prod_pages[(pg - 1) & (PROD_PAGES - 1)] | t->prod_pages[pg & (PROD_PAGES - 1)] |
          t->prod_pages[(pg + 1) & (PROD_PAGES - 1)]))
        return 0;
    for (unsigned i = 0; i < PROD; i++) { /* (without branches: which of them match is anyone's guess) */
        uint64_t d = t->prod_done[i];
        bool near = vaddr - t->prod_value[i] + 4096 < 8192;
        d = near && d > now ? d : 0;
        dep = d > dep ? d : dep;
    }
    return dep;
}

/* An L1D hit on a line the timeline watches (VCpu.watch: still being filled, or prefetched and not
 * used yet), at instruction insn: the memory callback's leaf calls it directly (it knows the access hit) */
static inline __attribute__((always_inline)) void hit_watched(VCpu *v, const InsnDesc *d, uint64_t vaddr,
                                                              uint64_t paddr, unsigned size, bool store,
                                                              uint64_t insn)
{
    Timing *t = v->t;
    uint64_t line = paddr >> l1d_shift;
    Pft *e = pft_of(t, line);
    bool inflight = insn < e->insn_done;
    if (inflight && e->pf == PF_L1) /* the first demand access of a line its prefetch is still filling */
        primary_miss(v, clock_at(v, insn), e->done);
    if (inflight) {
        v->c.l1d_inflight++;
        if (store) {
            if (t->sb_n && e->done > t->last_commit)
                t->last_commit = e->done;
        } else {
            producer(v, vaddr, size, e->done);
        }
    }
    if (e->pf == PF_L1) {
        e->pf = PF_NONE;
        if (inflight)
            v->c.hwpf_late[0]++;
        else
            v->c.hwpf_useful[0]++;
        uint64_t now = clock_at(v, insn);
        t->cur_pc = d ? d->tb->ivaddr[d->idx] : 0;
        train(v, 1, line, t->cur_pc, paddr, now, insn, false, true);
    }
    if (!inflight && e->pf == PF_NONE)
        *pft_line(t, line) = INVALID_TAG;
}

void timing_hit(VCpu *v, const InsnDesc *d, uint64_t vaddr, unsigned size, bool store)
{
    hit_watched(v, d, vaddr, vaddr, size, store, insns_at(v, d));
}

void timing_access(VCpu *v, const InsnDesc *d, uint64_t vaddr, uint64_t paddr, unsigned size, bool store,
                   const AccessMark *before)
{
    Timing *t = v->t;
    uint64_t line = paddr >> l1d_shift;
    uint64_t misses = v->c.l1d_load_misses + v->c.l1d_store_misses;
    uint64_t insn = insns_at(v, d);
    Pft *e = pft_of(t, line);
    if (misses == before->misses) {
        /* an L1D hit: only a line still being filled, or prefetched and not used yet, matters */
        if (LIKELY(*pft_line(t, line) != line))
            return;
        hit_watched(v, d, vaddr, paddr, size, store, insn);
        return;
    }
    /* an L1D miss: served by the L2, the L3 or memory (what the counts moved by) */
    int lvl;
    uint64_t mem_q8 = 0;
    if (v->c.l1d_rmiss_l2hit != before->l2hit)
        lvl = 2;
    else if (v->c.l1d_rmiss_l3hit != before->l3hit)
        lvl = 3;
    else {
        lvl = 4;
        mem_q8 = (v->c.mem_cycles_d - before->mem_cycles) << Q;
    }
    uint64_t loads = v->c.loads + v->c.lean[0], stores = v->c.stores + v->c.lean[1];
    uint64_t now = clock_at(v, insn);
    retire(v, insn, loads, stores, &now);
    t->cur_pc = d ? d->tb->ivaddr[d->idx] : 0;
    uint64_t start = now;
    if (!store) {
        uint64_t dep = depends(v, vaddr, now);
        if (dep) {
            /* its translation, too, waits for the address: this access's TLB walk after the load it
             * depends on (charged in the serial part as every walk is) */
            uint64_t dt = v->c.dtlb_misses - before->dtlb_misses, st = v->c.stlb_misses - before->stlb_misses;
            dep += (have_stlb ? dt * cfg.stlb_lat + st * cfg.tlb_miss : dt * cfg.tlb_miss) << Q;
        }
        if (dep > start) {
            start = dep;
            v->c.dependent_misses++;
        }
    }
    /* a line on its way (a prefetch into the L2, or a fill this L1 lost to an eviction) comes no
     * sooner than that fill */
    bool held = *pft_line(t, line) == line;
    uint64_t not_before = held && insn < e->insn_done ? e->done : 0;
    bool pf_l2 = held && e->pf == PF_L2 && lvl == 2;
    uint64_t done = fill(v, line, lvl, mem_q8, &start, true, not_before);
    if (pf_l2 && not_before)
        v->c.hwpf_late[1]++;
    else if (pf_l2)
        v->c.hwpf_useful[1]++;
    primary_miss(v, start, done);
    pft_put(v, line, done, now, insn, PF_NONE);
    if (store) {
        t->last_commit = done > t->last_commit ? done : t->last_commit;
        unsigned i = (t->sb_head + t->sb_n) % SBQ;
        if (t->sb_n == SBQ) {
            stall(v, &now, t->sbq[t->sb_head].commit);
            t->sb_head = (t->sb_head + 1) % SBQ;
            t->sb_n--;
            i = (t->sb_head + t->sb_n) % SBQ;
        }
        t->sbq[i].store = stores;
        t->sbq[i].commit = t->last_commit;
        t->sb_n++;
    } else {
        unsigned i = (t->rob_head + t->rob_n) % ROBQ;
        t->rob[i].insn = insn;
        t->rob[i].load = loads;
        t->rob[i].done = done;
        t->rob_n++;
        producer(v, vaddr, size, done);
    }
    /* the prefetchers hear the miss: the L2's first (the miss reaches the L2 before any prefetch it
     * starts at the L1D, as in gem5), then the L1D's */
    if (have_l2)
        l2_access(v, line, start, insn, lvl != 2, pf_l2);
    train(v, 1, line, t->cur_pc, paddr, start, insn, true, false);
}

/* A marker or the end: the core waits for every outstanding load and store. */
void timing_drain(VCpu *v, uint64_t insn)
{
    Timing *t = v->t;
    if (!t)
        return;
    if (insn > v->c.insns) /* a marker in a block whose entry was not counted (fast_forward=2): its count less
                            * the instructions after it went below 0 */
        insn = v->c.insns;
    uint64_t now = clock_at(v, insn);
    uint64_t until = 0;
    for (unsigned i = 0, h = t->rob_head; i < t->rob_n; i++, h = (h + 1) % ROBQ)
        if (t->rob[h].done > until)
            until = t->rob[h].done;
    if (t->sb_n && t->last_commit > until)
        until = t->last_commit;
    stall(v, &now, until);
    t->rob_n = t->sb_n = 0;
}
