/*
 * ffreset.c - ff_reset=1 (system mode, fast_forward=2): what runs before the
 * first region at plain QEMU speed.
 *
 * Under fast_forward=2 nothing is modelled before the first region marker, but
 * QEMU still calls the block callback of every block and the memory callback
 * of every access (each returns at once): in a guest lane that is the boot (the
 * sun4u guest boots in every run: docs/model.md, "Snapshots") or, restored from
 * a snapshot, the first command's start. With ff_reset=1, until the first
 * TL_ROI_BEGIN only the translation blocks that hold a marker instruction get
 * the model's callbacks (all of them, as with ff_reset=0), and the other blocks
 * only the ctx_switch= loads' (so the model's address space is the current one
 * when the first region starts, as with ff_reset=0).
 *
 * When a BEGIN marker executes, the plugin calls qemu_plugin_reset. QEMU 7.2
 * (plugins/loader.c, plugin_reset_uninstall) queues the reset as safe work on
 * the marker's vCPU (async_safe_run_on_cpu, which kicks it: cpu_exit sets its
 * exit request); every translation block begins by testing that request, so
 * the vCPU finishes the block the marker is in and leaves the execution loop
 * at the next block's start, before running it. The work then runs with every
 * vCPU stopped (start_exclusive): tb_flush, every callback of the plugin
 * unregistered, then reset_done below, which registers them again. From then on
 * every block is translated with the full instrumentation, as with ff_reset=0.
 * What ran between the marker and the reset is the rest of the marker's block,
 * which had the full instrumentation: the region's counts are those of
 * ff_reset=0 (the guest lanes' figures are checked equal: docs/model.md, tests/test_85_model_lane.py).
 *
 * One reset per run, asked by the first BEGIN only: QEMU 7.2's
 * plugin_reset_destroy takes plugin.lock twice and releases it once (fixed
 * upstream in 2025, QEMU issue 2901), so the vCPU thread that ran the reset
 * keeps that recursive lock, and another thread that asked for a second reset
 * would wait for it forever. In system mode nothing else takes the lock once
 * the vCPUs exist (a user-mode thread started later would: hence system mode
 * only).
 *
 * Another vCPU (the two-vCPU x86_64 guest runs multi-threaded TCG) that began a
 * region after the first BEGIN and before the reset took effect would have run
 * its next blocks without callbacks; reset_done, with every vCPU stopped, checks
 * that no vCPU but the marker's has a region open and aborts the run otherwise
 * (a single-threaded guest program cannot do that: its next BEGIN comes after a
 * whole region on the marker's vCPU, which stops at its next block).
 */
#include <stdlib.h>

#include "model.h"

bool ff_marker_only;
static unsigned reset_vcpu;
static bool reset_asked;

int ffreset_install(void)
{
    if (!cfg.ff_reset)
        return 0;
    if (!system_mode)
        return fail("ff_reset=1: system mode only (QEMU 7.2's reset keeps its plugin lock held: a thread started "
                    "later would hang); valid here: ff_reset=0");
    if (cfg.fast_forward != 2)
        return fail("ff_reset=1 needs fast_forward=2 (it skips the callbacks of what runs before the first region, "
                    "which only fast_forward=2 leaves unmodelled); valid: fast_forward=2");
    ff_marker_only = true;
    return 0;
}

bool ffreset_has_marker(const TBDesc *t)
{
    for (uint32_t i = 0; i < t->n_insns; i++)
        if (t->insn[i].special == SP_ROI_BEGIN || t->insn[i].special == SP_ROI_END)
            return true;
    return false;
}

/* with every vCPU stopped (start_exclusive), after tb_flush and with none of
 * the plugin's callbacks registered */
static void reset_done(qemu_plugin_id_t id)
{
    __atomic_store_n(&ff_marker_only, false, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < MAX_VCPUS; i++) {
        VCpu *v = vcpus[i];
        if (v && v->open && i != reset_vcpu) {
            fprintf(stderr, "trapline-model: ff_reset=1: vCPU %u began a region while vCPU %u's reset was "
                            "pending: its first blocks ran without callbacks; run with ff_reset=0\n", i, reset_vcpu);
            abort();
        }
    }
    register_callbacks(id);
}

void ffreset_request(unsigned vi)
{
    if (__atomic_exchange_n(&reset_asked, true, __ATOMIC_ACQ_REL))
        return;
    reset_vcpu = vi;
    qemu_plugin_reset(plugin_id, reset_done);
}

/* a block without a marker before the first region: only the ctx_switch= loads
 * (as tb_trans registers them) */
void ffreset_tb_trans(struct qemu_plugin_tb *tb, size_t n)
{
    if (!cfg.ctx_switch)
        return;
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        int64_t simm;
        if (context_insn(qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn), qemu_plugin_insn_vaddr(insn),
                         &simm))
            qemu_plugin_register_vcpu_mem_cb(insn, context_mem, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW,
                                             (void *)(intptr_t)simm);
    }
}
