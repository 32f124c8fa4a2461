/*
 * physfetch.c - fetch_phys=1 (system mode): the cache line of an instruction
 * fetch from its physical page, not its virtual one.
 *
 * Plugin API 1 gives a data access its guest-physical address
 * (qemu_plugin_hwaddr_phys_addr) but a fetch only its virtual address and
 * qemu_plugin_insn_haddr, the host address of the guest RAM that holds the
 * instruction. Every guest-physical page of one RAM block has one host page,
 * so the host address names the physical line uniquely; and QEMU maps a RAM
 * block at a host address aligned to QEMU_VMALLOC_ALIGN (2 MiB on x86_64 Linux
 * hosts: include/qemu/osdep.h, util/oslib-posix.c qemu_anon_ram_alloc), so for
 * a guest whose RAM starts at guest-physical 0 (sun4u, raspi0, pc below 3 GiB)
 * its low 21 bits are the guest-physical address's: the set index of any
 * cache of up to 2 MiB per way. Fetch lines stay tagged apart from data lines
 * (ITAG), so only the index and the identity of a physical line matter.
 *
 * Used at translation time only (the block's runs of fetched lines), so the
 * execution path is the same with the option on or off. The TLBs stay
 * virtual. An instruction QEMU fetched from outside RAM (haddr NULL: a ROM
 * device) keeps its virtual line.
 */
#include "model.h"

uint64_t fetch_addr(const struct qemu_plugin_insn *insn, uint64_t vaddr)
{
    if (!cfg.fetch_phys || !system_mode)
        return vaddr;
    void *h = qemu_plugin_insn_haddr(insn);
    return h ? (uint64_t)(uintptr_t)h : vaddr;
}
