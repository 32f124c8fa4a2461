/*
 * context.c - ctx_switch=ADDR (system mode, sparc64): the model's TLBs serve
 * one address space at a time.
 *
 * The model's TLBs are looked up by virtual page and have no context tags, so
 * without this a process could hit entries another process left at the same
 * virtual address (as an MMU with shared contexts would let it; the
 * UltraSPARC T1 has none). Plugin API 1 cannot read the context register, but
 * Linux (6.1, arch/sparc/kernel/tsb.S) switches address spaces in one place,
 * __tsb_context_switch(pgd_pa, tsb_base, tsb_huge, tsb_descr_pa, ctx), called by
 * switch_mm and activate_mm, and that function loads from its second argument,
 * &mm->context.tsb_block[MM_TSB_BASE]: `ldx [%o1 + simm13], ...`. The address
 * of such a load, less its displacement, is therefore the mm itself. When it
 * differs from the last one seen on this vCPU, the vCPU's ITLB, DTLB and second
 * level (the TSB, which Linux keeps per mm) are emptied and the switch is
 * counted (context_switches). Emptying, not tagging: a process switched back
 * to finds none of its old entries, where a context-tagged TLB might keep a
 * few; the kernel's own entries are emptied too.
 *
 * The guest lane passes the function's address from the guest's System.map.
 * Only the matching loads get a callback (registered at translation), so
 * nothing else runs on the execution path, with the option on or off.
 */
#include "model.h"

/* sparc64 `ldx [%o1 + simm13], rd`: op 3, op3 0x0b, rs1 9 (%o1), i 1; its
 * displacement in *simm */
bool context_insn(const uint8_t *b, size_t n, uint64_t va, int64_t *simm)
{
    if (!cfg.ctx_switch || !system_mode || cfg.arch != ARCH_SPARC64 || n != 4 || va < cfg.ctx_switch ||
        va >= cfg.ctx_switch + 0x100)
        return false;
    uint32_t w = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
    *simm = (int64_t)((int32_t)(w << 19) >> 19);
    return (w >> 30) == 3 && ((w >> 19) & 0x3f) == 0x0b && ((w >> 14) & 0x1f) == 9 && ((w >> 13) & 1);
}

static void tlb_empty(Array *a)
{
    if (!a->e)
        return;
    uint64_t n = (a->set_mask + 1) * a->stride;
    for (uint64_t i = 0; i < n; i++)
        a->e[i] = INVALID_TAG;
    n = a->t ? (a->set_mask + 1) * (a->ways - a->stride) : 0;
    for (uint64_t i = 0; i < n; i++)
        a->t[i] = INVALID_TAG;
}

void context_mem(unsigned int vi, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud)
{
    (void)info;
    VCpu *v = vcpus[vi];
    uint64_t mm = vaddr - (uint64_t)(int64_t)(intptr_t)ud; /* ud: the load's displacement */
    if (!v || mm == v->ctx)
        return;
    if (v->ctx) {
        tlb_empty(&v->itlb);
        tlb_empty(&v->dtlb);
        if (have_stlb)
            tlb_empty(&v->stlb);
        v->last_ipage = INVALID_TAG;
        /* counted where the other counters are (fast_forward: only while modelling) */
        if (__atomic_load_n(&modelling, __ATOMIC_RELAXED) && (!regions_only || v->open))
            v->c.ctx_switches++;
    }
    v->ctx = mm;
}
