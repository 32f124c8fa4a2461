/*
 * decode.c - what the model needs to know about an instruction, decided once
 * at translation time: region markers, locked read-modify-writes, prefetches
 * (their strength and, where the encoding names it, their address), SPARC
 * register-window instructions and access widths (for the progress audit),
 * and the kind of a sparc64 trap-table entry.
 */
#include <string.h>

#include "model.h"


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

/* ------------------------------------------------------------ decoding */

const char *const trap_kind_name[] = {"unaligned", "spill", "fill", "clean_window", "mmu_miss",
                                      "trap_instruction", "interrupt", "other"};

/* The kind of the trap whose entry is slot tt of the table, or -1 for a slot
 * that is the continuation of the entry before it: clean_window (0x024), the
 * MMU miss and protection handlers (0x064-0x06f) and the spill and fill
 * handlers (0x080-0x0ff) take four slots each, so only every fourth slot is
 * an entry (SPARC V9 7.7, table 7-1). */
int sparc_trap_kind(unsigned tt)
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

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

void decode_x86(InsnDesc *d, const uint8_t *b, size_t n, uint64_t vaddr)
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
    bool lock = false, rep = false;
    for (; i < n; i++) {
        uint8_t p = b[i];
        if (p == 0xf0)
            lock = true;
        else if (p == 0xf2 || p == 0xf3)
            rep = true;
        else if (!(p == 0xf2 || p == 0xf3 || p == 0x2e || p == 0x36 || p == 0x3e || p == 0x26 || p == 0x64 ||
                   p == 0x65 || p == 0x66 || p == 0x67))
            break;
    }
    if (i < n && (b[i] & 0xf0) == 0x40) /* REX */
        i++;
    if (i >= n)
        return;
    uint8_t op = b[i];
    /* rep ins/outs/movs/cmps/stos/lods/scas: QEMU runs one iteration per execution */
    d->rep = rep && ((op >= 0x6c && op <= 0x6f) || (op >= 0xa4 && op <= 0xa7) || (op >= 0xaa && op <= 0xaf));
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

void decode_sparc(InsnDesc *d, const uint8_t *b, size_t n)
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

void decode_arm(InsnDesc *d, const uint8_t *b, size_t n)
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
