/*
 * traps.c - the events that cost a trap or a page walk rather than a cache
 * access: software prefetches (strong or weak; dropped, walked or trapped),
 * SPARC register windows (spill and fill traps at save, restore and flushw)
 * and the SPARC progress audit, which finds the accesses that trapped before
 * they reached the memory callback (an unaligned access) and takes the
 * instructions that never ran back off the count.
 */
#include "model.h"

void prefetch_exec(VCpu *v, const InsnDesc *d)
{
    v->c.pf_issued++;
    if (!d->pf_known) {
        v->c.pf_unknown++;
        return;
    }
    bool strong = d->pf_strong && cfg.prefetch;
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
void audit_progress(VCpu *v, unsigned idx)
{
    if (v->pending >= 0 && (unsigned)v->pending < idx) {
        window_op(v, v->pending_op);
        v->pending = -1;
    }
    if (idx > v->done)
        v->done = idx;
}

void tb_finalize(VCpu *v, uint64_t next_vaddr)
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
        if (unaligned_pol[k] == POL_TRAP)
            v->c.unaligned_trap++;
        else
            v->c.unaligned_hw++;
    } else {
        v->c.other_faults++; /* system mode: an MMU miss or another trap */
    }
}
