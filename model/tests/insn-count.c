/*
 * insn-count.c - a reference QEMU plugin for tests/test_80_model_plugin.py:
 * counts executed guest instructions the slow, obvious way (one exec
 * callback per instruction), independently of the model's per-block
 * counting. An instruction whose exec callback fires twice in a row faulted
 * and ran again (QEMU's own SPARC register-window traps restart the save or
 * restore): it is counted once. Prints "insn-count <n>" on stderr at exit.
 * (Not for x86 string instructions with a rep prefix, which legitimately
 * run one iteration per execution of the same instruction: use repeats=1.)
 *
 *   qemu-sparc64 -plugin libinsn-count.so[,repeats=1] PROGRAM
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

static uint64_t count, last = UINT64_MAX;
static int repeats; /* 1: count every execution, even back-to-back ones */

static void exec_cb(unsigned int vcpu, void *udata)
{
    uint64_t pc = (uint64_t)(uintptr_t)udata;
    if (pc != last || repeats)
        count++;
    last = pc;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    for (size_t i = 0; i < qemu_plugin_tb_n_insns(tb); i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        qemu_plugin_register_vcpu_insn_exec_cb(insn, exec_cb, QEMU_PLUGIN_CB_NO_REGS,
                                               (void *)(uintptr_t)qemu_plugin_insn_vaddr(insn));
    }
}

static void at_exit(qemu_plugin_id_t id, void *p)
{
    fprintf(stderr, "insn-count %" PRIu64 "\n", count);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "repeats=1"))
            repeats = 1;
        else {
            fprintf(stderr, "insn-count: unknown option %s (valid: repeats=1)\n", argv[i]);
            return -1;
        }
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
