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
 * with the list of valid ones. They are listed once, in options.def (name,
 * kind, default, range, unit, the machine field they come from, doc);
 * help=json prints that table. The other files (model.h lists them): options.c,
 * caches.c, traps.c, decode.c, stats.c; this one installs the plugin and holds
 * the callbacks and the translation-time block descriptors.
 *
 * How the hot path is kept cheap:
 *  - one callback per executed translation block (not per instruction)
 *    counts its instructions and does its instruction fetches: the block's
 *    fetches are precomputed at translation time as runs of consecutive
 *    fetches from the same cache line (and page); a run is one L1I (ITLB)
 *    lookup plus (run length - 1) guaranteed hits, and no lookup at all when
 *    it is the line (page) fetched last or its set's most recent one;
 *  - one callback per data access (QEMU gives no address otherwise); its
 *    common case (aligned, the most recent page and line of their sets) is
 *    counted inline (data_access, model.h), the rest walks the arrays in one
 *    pass per set (array_read; unrolled for sets of 4 and 8 ways), with the
 *    last level's set prefetched;
 *  - the callbacks are chosen per run at translation (tb_exec_t, mem_exec_t):
 *    a user-mode run without fast_forward= or trace= gets variants that test
 *    none of those features per block or access, and their common cases are
 *    leaves that tail-call the rest: tb_exec_lean (a block of one or two
 *    line runs and one page run, all at their sets' heads) and mem_exec_lean
 *    (an aligned one-line access whose page and line are at way 0 or 1 of
 *    their DTLB and L1D sets; way 1 is a swap);
 *  - the work is done in the callback, not deferred: a per-vCPU buffer of
 *    events modelled in batches (the guest's own gathers then overlap, and
 *    the model's lookups can be prefetched ahead) measured 4-16% slower on
 *    x86_64, a queue of only the accesses that miss the L1D 9-15% slower:
 *    the appending and the second pass cost more than the stalls they hid
 *    (docs/model.md, "Performance");
 *  - the plugin is built with -flto, so these paths inline across files, and
 *    the miss walk's steps are always inlined (caches.c, HOT);
 *  - instruction exec callbacks only on the few instructions that need one
 *    (ROI markers, SPARC save/restore/return/flushw, prefetches, x86 rep
 *    string instructions); a lean run's block that is a rep string
 *    instruction alone (QEMU 7.2 runs one iteration per block: memset's and
 *    memcpy's rep stosb and rep movsb) has one callback for both
 *    (rep_exec_lean);
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
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

/* ------------------------------------------------------------ state */

VCpu *vcpus[MAX_VCPUS];
static pthread_mutex_t vcpu_lock = PTHREAD_MUTEX_INITIALIZER;
bool have_l2, have_l3, have_stlb;
bool numa_local;
uint64_t region_seq;
uint64_t itag;
unsigned l1i_shift, l1d_shift, l2_shift, l3_shift, page_shift;
uint64_t l1d_line_mask;
bool audit_faults;
bool system_mode;
bool modelling = true;
bool regions_only;
const char *target_name = "";
qemu_plugin_id_t plugin_id;
FILE *trace_fp;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;

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
        v->node = vi < cfg.numa_cpus_n ? (unsigned)cfg.numa_cpus[vi] : vi % (unsigned)cfg.numa_nodes;
        array_init(&v->itlb, cfg.itlb_entries, cfg.itlb_assoc, page_shift);
        array_init(&v->dtlb, cfg.dtlb_entries, cfg.dtlb_assoc, page_shift);
        if (have_stlb)
            array_init(&v->stlb, cfg.stlb_entries, cfg.stlb_assoc, page_shift);
        v->cansave = cfg.nwindows ? cfg.nwindows - 2 : 0;
        v->canrestore = 0;
        v->pending = -1;
        v->last_iline = v->last_ipage = v->rep_pc = INVALID_TAG;
        timing_vcpu_init(v); /* core=ooo only */
        __atomic_store_n(&vcpus[vi], v, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&vcpu_lock);
    contention_vcpu_init(vi); /* lockstep=on only */
}

/* ------------------------------------------------------------ callbacks */

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
        v->last_ipage = p;
    }
}

/* REP: the instruction is known to be a repeated string instruction that is nothing else (rep_exec_lean) */
static inline __attribute__((always_inline)) void special_body(unsigned int vi, void *ud, const bool REP)
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
        if (!REP && audit_faults)
            audit_progress(v, d->idx);
        if (!REP && UNLIKELY(d->tail))
            tail_exec(v, d);
        if (REP || d->rep) {
            /* a repeat: the same instruction again with nothing executed between (its block is itself) */
            uint64_t pc = d->tb->ivaddr[d->idx];
            v->c.rep_repeats += pc == v->rep_pc && v->c.insns == v->rep_mark + 1;
            v->rep_pc = pc;
            v->rep_mark = v->c.insns;
        }
    }
    if (REP)
        return;
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
        if (UNLIKELY(__atomic_load_n(&ff_marker_only, __ATOMIC_RELAXED)))
            ffreset_request(vi); /* ff_reset=1: the first region (ffreset.c) */
        v->any_marker = true;
        if (v->t) /* core=ooo: what is outstanding completes before the region (timing.c) */
            timing_drain(v, v->c.insns - d->n_after);
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
        if (v->t) /* core=ooo: the region's outstanding accesses complete inside it */
            timing_drain(v, v->c.insns - d->n_after - 1u);
        Counters now = v->c;
        now.insns -= d->n_after + 1u; /* neither the marker nor the rest of the block */
        region_close(v, &now, 0);
        if (UNLIKELY(trace_fp))
            trace_line("E\n");
        break;
    }
    }
}

static void special_exec(unsigned int vi, void *ud)
{
    special_body(vi, ud, false);
}

/* The block callback. It is one body with the features a run may have as
 * compile-time flags (ff: fast_forward=, audit: the SPARC fault audit, trace:
 * trace=): tb_trans registers the variant of this run's features, so a
 * feature the run does not have costs nothing per block. */
static inline __attribute__((always_inline)) void tb_exec_t(unsigned int vi, void *ud, bool ff, bool audit,
                                                            bool trace)
{
    VCpu *v = vcpus[vi];
    const TBDesc *t = ud;

    if (ff && UNLIKELY(!__atomic_load_n(&modelling, __ATOMIC_RELAXED)))
        return;
    if (ff && UNLIKELY(regions_only && !v->open)) {
        /* the block a region ended in is audited now that the next one starts;
         * blocks between regions are not */
        if (audit_faults) {
            tb_finalize(v, t->vaddr);
            v->cur_tb = NULL;
        }
        return;
    }
    if (audit) {
        tb_finalize(v, t->vaddr);
        v->cur_tb = t;
        v->done = 0;
    }
    v->c.insns += t->n_entry;
    if (trace && UNLIKELY(trace_fp)) {
        pthread_mutex_lock(&trace_lock);
        for (uint32_t i = 0; i < t->n_entry; i++)
            fprintf(trace_fp, "I %" PRIx64 " %u\n", t->ivaddr[i], t->isize[i]);
        pthread_mutex_unlock(&trace_lock);
    }
    /* a run is one lookup and (count - 1) hits; a lookup of the set's most
     * recently used line (page) is a hit that changes nothing, counted here */
    for (uint32_t i = 0; i < t->n_irun; i++) {
        const Run *r = &t->irun[i];
        if (LIKELY(r->key == v->last_iline) || array_is_mru(&v->l1i, r->key)) {
            v->c.l1i_hits += r->count;
            v->c.l1i_fetches += r->key != v->last_iline;
            v->last_iline = r->key;
        } else {
            l1i_fetch_line(v, r->key);
            v->c.l1i_hits += r->count - 1;
        }
    }
    if (have_itlb) {
        for (uint32_t i = 0; i < t->n_prun; i++) {
            const Run *r = &t->prun[i];
            if (UNLIKELY(r->key != v->last_ipage) && !array_is_mru(&v->itlb, r->key))
                tlb_access(v, &v->itlb, r->key, &v->c.itlb_misses);
            v->last_ipage = r->key;
            v->c.itlb_accesses += r->count;
        }
    }
}

static void tb_exec(unsigned int vi, void *ud)
{
    tb_exec_t(vi, ud, true, audit_faults, true);
}

static __attribute__((noinline)) void tb_lean_slow(unsigned int vi, void *ud)
{
    tb_exec_t(vi, ud, false, false, false);
}

/* no fast_forward, no audit, no trace: the common case as a leaf, anything
 * else a tail call. The common case: a block in one or two lines and one
 * page, each line the one fetched last or the most recent of its L1I set,
 * the page the one fetched last or the most recent of its ITLB set: every
 * fetch a hit that changes nothing, tb_exec_t's counts without its loops
 * (a loop body across a line boundary is two runs) */
static inline __attribute__((always_inline)) void tb_lean_body(unsigned int vi, void *ud)
{
    VCpu *v = vcpus[vi];
    const TBDesc *t = ud;
    if (LIKELY(t->leaf && (t->iline1 == v->last_iline || array_is_mru(&v->l1i, t->iline1)) &&
               (t->iline2 == t->iline1 || array_is_mru(&v->l1i, t->iline2)) &&
               (t->ipage1 == v->last_ipage || array_is_mru(&v->itlb, t->ipage1)))) {
        v->c.insns += t->n_entry;
        v->c.l1i_hits += t->leaf_ihits;
        v->c.l1i_fetches += (t->iline1 != v->last_iline) + (t->iline2 != t->iline1);
        v->c.itlb_accesses += t->leaf_iacc;
        v->last_iline = t->iline2;
        v->last_ipage = t->ipage1;
        return;
    }
    tb_lean_slow(vi, ud);
}

static void tb_exec_lean(unsigned int vi, void *ud)
{
    tb_lean_body(vi, ud);
}

/* a lean run's block that is one repeated string instruction and nothing else (memset's and memcpy's
 * rep stosb / rep movsb, QEMU 7.2 runs one iteration per block): its block and instruction callbacks in
 * one, in their order (the block's first) */
static void rep_exec_lean(unsigned int vi, void *ud)
{
    const InsnDesc *d = ud;
    tb_lean_body(vi, (void *)d->tb);
    special_body(vi, ud, true);
}

static void tb_exec_audit(unsigned int vi, void *ud) /* the same with the audit (SPARC) */
{
    tb_exec_t(vi, ud, false, true, false);
}

/* The memory callback, like tb_exec_t one body with the run's features as
 * flags (sys: system mode; locked: the instruction may be a locked RMW,
 * known at translation) and variants chosen per instruction in tb_trans. */
static inline __attribute__((always_inline)) void mem_exec_t(unsigned int vi, qemu_plugin_meminfo_t info,
                                                             uint64_t vaddr, void *ud, bool ff, bool audit,
                                                             bool sys, bool trace, bool locked, bool oo)
{
    VCpu *v = vcpus[vi];
    const InsnDesc *d = ud;
    if (ff && UNLIKELY(!__atomic_load_n(&modelling, __ATOMIC_RELAXED)))
        return;
    if (ff && UNLIKELY(regions_only && !v->open))
        return;
    /* QEMU 7.2 packs the direction above the MemOpIdx (include/qemu/plugin.h:
     * make_plugin_meminfo): 1 = read, 2 = write, 3 = an atomic
     * read-modify-write reported once (parallel TCG). The MemOpIdx is
     * MemOp << 4 | mmu index, and the MemOp's low 3 bits are the size's log2:
     * what qemu_plugin_mem_size_shift(info) returns (checked equal on every
     * access of the x86_64, sparc64 and armv6 benchmarks), read here without
     * that call into QEMU (3% of the time on sparc64). */
    unsigned size = 1u << ((info >> 4) & 7);
    unsigned rw = (info >> 16) & 3;

    if (audit && d->idx >= v->done)
        v->done = d->idx + 1u;
    uint64_t paddr = vaddr;
    if (sys && system_mode) {
        struct qemu_plugin_hwaddr *hw = qemu_plugin_get_hwaddr(info, vaddr);
        if (hw) {
            if (qemu_plugin_hwaddr_is_io(hw)) { /* a device register: no cache, no TLB model */
                v->c.io_accesses++;
                return;
            }
            paddr = qemu_plugin_hwaddr_phys_addr(hw);
        }
    }
    if (trace && UNLIKELY(trace_fp))
        trace_line("%c %" PRIx64 " %u\n", rw == 2 ? 'W' : 'R', vaddr, size);
    bool lk = locked && d->locked;
    AccessMark m;
    if (UNLIKELY(rw == 3)) {
        if (oo)
            access_mark(v, &m);
        data_access(v, vaddr, paddr, size, false, lk, true);
        if (oo)
            timing_access(v, d, vaddr, paddr, size, false, &m);
        if (trace && UNLIKELY(trace_fp))
            trace_line("W %" PRIx64 " %u\n", vaddr, size);
        if (oo)
            access_mark(v, &m);
        data_access(v, vaddr, paddr, size, true, lk, false);
        if (oo)
            timing_access(v, d, vaddr, paddr, size, true, &m);
        return;
    }
    if (oo)
        access_mark(v, &m);
    data_access(v, vaddr, paddr, size, rw == 2, lk, rw != 2);
    if (oo)
        timing_access(v, d, vaddr, paddr, size, rw == 2, &m);
}

static void mem_exec(unsigned int vi, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud)
{
    mem_exec_t(vi, info, vaddr, ud, true, audit_faults, true, true, true, false);
}

/* core=ooo: every access also goes on the core's timeline (timing.c); the same with a run's features,
 * and a user-mode run's without them */
static void mem_exec_ooo(unsigned int vi, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud)
{
    mem_exec_t(vi, info, vaddr, ud, true, audit_faults, true, true, true, true);
}

static void mem_exec_ooo_lean(unsigned int vi, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud)
{
    mem_exec_t(vi, info, vaddr, ud, false, false, false, false, true, true);
}

/* mem_exec_lean's accesses that are not the common case (data_access_full
 * finds the common case's hits too, with the same counts) */
static __attribute__((noinline)) void mem_lean_slow(VCpu *v, qemu_plugin_meminfo_t info, uint64_t vaddr)
{
    unsigned size = 1u << ((info >> 4) & 7);
    unsigned rw = (info >> 16) & 3;
    if (UNLIKELY(rw == 3)) {
        data_access_full(v, vaddr, vaddr, size, false, false, true);
        data_access_full(v, vaddr, vaddr, size, true, false, false);
        return;
    }
    if (LIKELY(!(vaddr & (size - 1)) && !((vaddr ^ (vaddr + size - 1)) >> l1d_shift) &&
               (rw != 2 || !cfg.l1d_write))) {
        data_access_line(v, vaddr, rw == 2);
        return;
    }
    data_access_full(v, vaddr, vaddr, size, rw == 2, false, rw != 2);
}

/* mem_lean_body's first test, by the access's (info >> 4) & LEAN_INDEX (the
 * size's log2 in bits 0-2, the direction in bits 12-13, make_plugin_meminfo):
 * the size - 1 (the address bits an aligned access has clear), or LEAN_SLOW
 * for an access the leaf does not take (an atomic RMW, larger than a line, a
 * write-through store). Set at install (lean_access_init); 32 of its entries
 * are ever read. */
#define LEAN_INDEX 0x3007u
#define LEAN_SLOW 0x80u
static uint8_t lean_access[LEAN_INDEX + 1];

static void lean_access_init(void)
{
    for (unsigned rw = 0; rw < 4; rw++)
        for (unsigned szlog = 0; szlog < 8; szlog++)
            lean_access[rw << 12 | szlog] = rw == 3 || szlog > l1d_shift || (rw == 2 && cfg.l1d_write)
                                                ? LEAN_SLOW
                                                : (uint8_t)((1u << szlog) - 1);
}

/* The memory callback of a lean run (user mode, no fast_forward=, trace= or
 * audit; an instruction that is not locked): mem_exec_t's common case
 * (data_access) as a leaf that touches no callee-saved register, anything
 * else a tail call. */
static inline __attribute__((always_inline)) void mem_lean_body(VCpu *v, qemu_plugin_meminfo_t info, uint64_t vaddr,
                                                                 const unsigned DW, const unsigned LW, const int X)
{
    /* aligned and no larger than a line: in one line; not an atomic RMW
     * (rw 3), not a write-through store (lean_access: the same tests, one
     * load); past this test the misses go straight to data_access_line (what
     * mem_lean_slow would choose for such an access, without decoding it
     * again) */
    if (UNLIKELY((vaddr | LEAN_SLOW) & lean_access[(info >> 4) & LEAN_INDEX]))
        return mem_lean_slow(v, info, vaddr);
    unsigned st = (info >> 17) & 1; /* the direction is 1 (a load) or 2 (a store) here: a store */
    /* the page is its DTLB set's most recent, or the one before it: a hit
     * that swaps the two (what array_read does); else the slow path looks it
     * up. Two streams whose pages share a set (x86_64 workload: a[] and idx[])
     * alternate there. */
    if (UNLIKELY(!array_head2_w(&v->dtlb, vaddr >> page_shift, DW)))
        return X ? data_access_line_x86(v, vaddr, st) : data_access_line(v, vaddr, st);
    /* the same for the line in its L1D set (a slow path taken from here finds
     * the page at its set's head: a hit, the swap was the lookup's one change) */
    uint64_t *ls = array_head2_w(&v->l1d, vaddr >> l1d_shift, LW);
    if (UNLIKELY(!ls))
        return X ? data_access_line_x86(v, vaddr, st) : data_access_line(v, vaddr, st);
    /* one DTLB access, a load or a store, an L1D hit, counted as one
     * (put_stats adds them up) */
    v->c.lean[st]++;
    *ls |= st;
}

static void mem_exec_lean(unsigned int vi, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud)
{
    mem_lean_body(vcpus[vi], info, vaddr, 0, 0, 0);
}

/* the same for the x86_64 machines' whole shape (x86_shape): its misses walk
 * data_access_line_x86 */
static void mem_exec_lean_x86(unsigned int vi, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud)
{
    mem_lean_body(vcpus[vi], info, vaddr, 4, 8, 1);
}

/* the same for a DTLB of 4 ways and an L1D of 8 (the x86_64 machines): the
 * sets' addresses without the multiply by a stride loaded from the array, and
 * no test of the ways' count (x86_64 reps=30: -2%) */
static void mem_exec_lean48(unsigned int vi, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud)
{
    mem_lean_body(vcpus[vi], info, vaddr, 4, 8, 0);
}

/* the same with the SPARC audit: the access reported, so it did not fault */
static void mem_exec_audit(unsigned int vi, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud)
{
    VCpu *v = vcpus[vi];
    const InsnDesc *d = ud;
    if (d->idx >= v->done)
        v->done = d->idx + 1u;
    mem_lean_body(v, info, vaddr, 0, 0, 0);
}

/* core=ooo, a lean run: mem_lean_body's leaf, and the timeline (timing_access) for what can change
 * it: a miss, and a hit on a line the timeline watches (in flight, or prefetched and not used); every
 * other hit changes nothing there. The counts and the timeline are mem_exec_ooo_lean's. */
static __attribute__((noinline)) void mem_ooo_line(VCpu *v, const InsnDesc *d, qemu_plugin_meminfo_t info,
                                                   uint64_t vaddr, unsigned st, int X)
{
    AccessMark m;
    access_mark(v, &m);
    if (X)
        data_access_line_x86(v, vaddr, st);
    else
        data_access_line(v, vaddr, st);
    timing_access(v, d, vaddr, vaddr, 1u << ((info >> 4) & 7), st, &m);
}

static __attribute__((noinline)) void mem_ooo_watched(VCpu *v, const InsnDesc *d, qemu_plugin_meminfo_t info,
                                                      uint64_t vaddr, unsigned st)
{
    timing_hit(v, d, vaddr, 1u << ((info >> 4) & 7), st);
}

static inline __attribute__((always_inline)) void mem_ooo_body(unsigned int vi, qemu_plugin_meminfo_t info,
                                                                uint64_t vaddr, void *ud, const unsigned DW,
                                                                const unsigned LW, const int X)
{
    VCpu *v = vcpus[vi];
    if (UNLIKELY((vaddr | LEAN_SLOW) & lean_access[(info >> 4) & LEAN_INDEX]))
        return mem_exec_ooo_lean(vi, info, vaddr, ud);
    unsigned st = (info >> 17) & 1;
    if (UNLIKELY(!array_head2_w(&v->dtlb, vaddr >> page_shift, DW)))
        return mem_ooo_line(v, ud, info, vaddr, st, X);
    uint64_t line = vaddr >> l1d_shift;
    uint64_t *ls = array_head2_w(&v->l1d, line, LW);
    if (UNLIKELY(!ls))
        return mem_ooo_line(v, ud, info, vaddr, st, X);
    v->c.lean[st]++;
    *ls |= st;
    if (UNLIKELY(v->watch[pft_index(line)] == line))
        mem_ooo_watched(v, ud, info, vaddr, st);
}

static void mem_exec_ooo_leaf(unsigned int vi, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud)
{
    mem_ooo_body(vi, info, vaddr, ud, 0, 0, 0);
}

static void mem_exec_ooo_leaf_x86(unsigned int vi, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud)
{
    mem_ooo_body(vi, info, vaddr, ud, 4, 8, 1);
}

static void mem_exec_ooo_leaf48(unsigned int vi, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud)
{
    mem_ooo_body(vi, info, vaddr, ud, 4, 8, 0);
}

/* a lean run's memory callback for an instruction that is not locked, chosen
 * once at install from the machine's shape (set_lean_leaf) */
static qemu_plugin_vcpu_mem_cb_t mem_exec_leaf = mem_exec_lean;

static void set_lean_leaf(void)
{
    if (ooo_on) /* (no audit: an audited run's accesses go to mem_exec_ooo) */
        mem_exec_leaf = x86_shape() ? mem_exec_ooo_leaf_x86 : shape48() ? mem_exec_ooo_leaf48 : mem_exec_ooo_leaf;
    else
        mem_exec_leaf = audit_faults  ? mem_exec_audit
                        : x86_shape() ? mem_exec_lean_x86
                        : shape48()   ? mem_exec_lean48
                                      : mem_exec_lean;
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
        uint64_t fa = fetch_addr(insn, va); /* == va unless fetch_phys */
        if (i == 0)
            t->fetch0 = fa;
        for (uint64_t l = fa >> l1i_shift; l <= (fa + (last - va)) >> l1i_shift; l++)
            add_run(t->irun, &t->n_irun, l);
        for (uint64_t p = va >> page_shift; p <= last >> page_shift; p++)
            add_run(t->prun, &t->n_prun, p);
    }
    /* one or two runs of lines and one of pages (what tb_exec_lean's common
     * case counts) */
    t->leaf = t->n_irun >= 1 && t->n_irun <= 2 && t->n_prun == 1;
    if (t->leaf) {
        t->iline1 = t->irun[0].key;
        t->iline2 = t->irun[t->n_irun - 1].key;
        t->ipage1 = t->prun[0].key;
        t->leaf_ihits = t->irun[0].count + (t->n_irun == 2 ? t->irun[1].count : 0);
        t->leaf_iacc = t->prun[0].count;
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
            n <= sizeof sizes && !memcmp(t->isize, sizes, n) &&
            (!cfg.fetch_phys || t->fetch0 == fetch_addr(qemu_plugin_tb_get_insn(tb, 0), vaddr)))
            break;
    if (t) {
        free(bytes);
    } else {
        t = build_desc(tb, bytes, n_bytes, n);
        t->next = tb_hash[h];
        tb_hash[h] = t;
    }
    pthread_mutex_unlock(&tb_lock);

    if (UNLIKELY(__atomic_load_n(&ff_marker_only, __ATOMIC_RELAXED)) && !ffreset_has_marker(t)) {
        ffreset_tb_trans(tb, n); /* ff_reset=1 before the first region: the ctx_switch= loads only */
        return;
    }
    /* the callbacks of this run's features (tb_exec_t, mem_exec_t): a run in
     * user mode without fast_forward= or trace= gets the lean ones */
    bool lean = !cfg.fast_forward && !system_mode && !trace_fp;
    bool rep_only = lean && !audit_faults && n == 1 && t->insn[0].rep && !t->insn[0].special && !t->insn[0].tail;
    if (rep_only)
        qemu_plugin_register_vcpu_tb_exec_cb(tb, rep_exec_lean, QEMU_PLUGIN_CB_NO_REGS, &t->insn[0]);
    else
        qemu_plugin_register_vcpu_tb_exec_cb(tb, !lean ? tb_exec : audit_faults ? tb_exec_audit : tb_exec_lean,
                                             QEMU_PLUGIN_CB_NO_REGS, t);
    if (ooo_on)
        timing_guest_base((uint64_t)(uintptr_t)qemu_plugin_insn_haddr(qemu_plugin_tb_get_insn(tb, 0)), vaddr);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        InsnDesc *d = &t->insn[i];
        qemu_plugin_register_vcpu_mem_cb(insn,
                                         ooo_on ? (!lean || audit_faults ? mem_exec_ooo
                                                   : d->locked    ? mem_exec_ooo_lean
                                                                  : mem_exec_leaf)
                                         : !lean || d->locked ? mem_exec : mem_exec_leaf,
                                         QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, d);
        if ((d->special || d->tail || d->rep) && !rep_only)
            qemu_plugin_register_vcpu_insn_exec_cb(insn, special_exec, QEMU_PLUGIN_CB_NO_REGS, d);
        int64_t simm;
        if (UNLIKELY(cfg.ctx_switch) && context_insn(qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn),
                                                     qemu_plugin_insn_vaddr(insn), &simm))
            /* (MEM_RW: registered with MEM_R, QEMU 7.2 never called it) */
            qemu_plugin_register_vcpu_mem_cb(insn, context_mem, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW,
                                             (void *)(intptr_t)simm);
    }
    contention_tb_trans(tb, t); /* lockstep=on only: its own callbacks, after these */
}

/* ------------------------------------------------------------ install */

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    int help = options_help(argc, argv);
    if (help < 0)
        return -1;
    if (help)
        exit(0); /* help=json: the table was printed; the guest does not run */
    options_defaults();
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
        if (options_parse(argv[i]))
            return -1;
    if (opt_given[OPT_arch] && cfg.arch != (int)target)
        return fail("arch=%s but this QEMU emulates '%s'", arch_names[cfg.arch], target_name);
    if (options_validate())
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
    numa_local = cfg.numa_nodes == 1 || (!system_mode && !cfg.numa_interleave);
    lean_access_init();
    timing_install();
    set_lean_leaf(); /* (after timing_install: ooo_on) */

    plugin_id = id;
    if (ffreset_install())
        return -1;
    if (cfg.trace) {
        trace_fp = fopen(cfg.trace, "w");
        if (!trace_fp)
            return fail("trace=%s: cannot open: %s", cfg.trace, strerror(errno));
        setvbuf(trace_fp, NULL, _IOFBF, 1 << 20);
    }
    register_callbacks(id);
    return contention_install(id); /* lockstep=on only */
}

/* the plugin's callbacks (again after ff_reset=1's reset: ffreset.c) */
void register_callbacks(qemu_plugin_id_t id)
{
    qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, plugin_exit, NULL);
}
