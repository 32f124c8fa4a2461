/*
 * stats.c - counters, regions and the stats JSON. Every counter is a
 * uint64_t, so a region is the difference of two snapshots; cycles =
 * cpi * instructions + every penalty, computed here from the counts (the hot
 * path only counts). The JSON has one entry per region of interest (or one
 * for the whole run without markers) and the run's total; its field names are
 * what trapline/plugin.py's COUNTERS read.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model.h"

void counters_sub(Counters *r, const Counters *a, const Counters *b)
{
    const uint64_t *pa = (const uint64_t *)a, *pb = (const uint64_t *)b;
    uint64_t *pr = (uint64_t *)r;
    for (size_t i = 0; i < NCOUNTERS; i++)
        pr[i] = pa[i] - pb[i];
}

void counters_add(Counters *r, const Counters *a)
{
    const uint64_t *pa = (const uint64_t *)a;
    uint64_t *pr = (uint64_t *)r;
    for (size_t i = 0; i < NCOUNTERS; i++)
        pr[i] += pa[i];
}

void region_close(VCpu *v, const Counters *now, uint8_t why)
{
    Counters r;
    counters_sub(&r, now, &v->snap);
    if (v->n_regions >= MAX_REGIONS) {
        counters_add(&v->overflow, &r);
        v->n_overflow++;
    } else {
        if (v->n_regions == v->cap_regions) {
            v->cap_regions = v->cap_regions ? 2 * v->cap_regions : 16;
            v->regions = realloc(v->regions, v->cap_regions * sizeof *v->regions);
            v->closed_by = realloc(v->closed_by, v->cap_regions);
            v->seq = realloc(v->seq, v->cap_regions * sizeof *v->seq);
            if (!v->regions || !v->closed_by || !v->seq)
                abort();
        }
        v->regions[v->n_regions] = r;
        v->seq[v->n_regions] = v->open_seq;
        v->closed_by[v->n_regions] = why;
        v->n_regions++;
    }
    v->open = false;
}

void sput(Str *s, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(s->buf + s->len, s->cap - s->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < s->cap - s->len) {
            s->len += n;
            return;
        }
        s->cap = s->cap * 2 + (n > 0 ? (size_t)n : 0) + 4096;
        s->buf = realloc(s->buf, s->cap);
        if (!s->buf)
            abort();
    }
}

/* One unified level below the L1s (l2, l3), or null where there is none. */
static void put_lower(Str *s, const char *ind, const char *name, bool present, uint64_t rh, uint64_t rm, uint64_t wh,
                      uint64_t wm, uint64_t wb)
{
    if (!present) {
        sput(s, "%s\"%s\": null,\n", ind, name);
        return;
    }
    sput(s,
         "%s\"%s\": {\"accesses\": %" PRIu64 ", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64 ", \"read_hits\": %" PRIu64
         ", \"read_misses\": %" PRIu64 ", \"write_hits\": %" PRIu64 ", \"write_misses\": %" PRIu64
         ", \"writebacks\": %" PRIu64 "},\n",
         ind, name, rh + rm + wh + wm, rh + wh, rm + wm, rh, rm, wh, wm, wb);
}

/* x >= 0 to the nearest integer, halves up: llround's result without the call into libm (the
 * timeline asks for the cycles at every miss). x - its integer part is exact below 2^53, and 0
 * above, where every double is an integer. */
static inline uint64_t round_cycles(double x)
{
    uint64_t r = (uint64_t)x;
    return r + (x - (double)r >= 0.5);
}

/* The cycles other than the instructions' (base) and the data stalls: fetch, TLBs, straddles,
 * traps, locks, windows, entries, waits, each into p[] (CYC_IFETCH, CYC_TLB ... CYC_WAIT); their sum.
 * (An L1I miss costs the latency of the level that served it minus the L1 hit latency already in
 * the base; memory latencies were summed per access, numa_lat[vCPU node][memory node].) */
static inline __attribute__((always_inline)) uint64_t serial_parts(const Counters *c, uint64_t *p)
{
    uint64_t l1i_mem = c->l1i_misses - c->l1i_miss_l2hit - c->l1i_miss_l3hit;
    uint64_t l2lat = have_l2 ? cfg.l2_lat : 0, l3lat = have_l3 ? cfg.l3_lat : 0;
    p[CYC_IFETCH] = c->l1i_miss_l2hit * (l2lat - cfg.l1i_lat) + c->l1i_miss_l3hit * (l3lat - cfg.l1i_lat) +
                    c->mem_cycles_i - l1i_mem * cfg.l1i_lat;
    uint64_t tlb_misses = c->itlb_misses + c->dtlb_misses;
    p[CYC_TLB] = have_stlb ? tlb_misses * cfg.stlb_lat + c->stlb_misses * cfg.tlb_miss : tlb_misses * cfg.tlb_miss;
    p[CYC_STRADDLE] = straddle_pen_int != UINT64_MAX ? straddle_pen_int * c->straddles
                                                     : round_cycles(cfg.straddle_penalty * (double)c->straddles);
    p[CYC_UNAL_HW] = unaligned_pen_int != UINT64_MAX ? unaligned_pen_int * c->unaligned_hw
                                                    : round_cycles(cfg.unaligned_penalty * (double)c->unaligned_hw);
    p[CYC_UNAL_TRAP] = c->unaligned_trap * cfg.trap_cost;
    p[CYC_LOCK] = c->locked_inline * cfg.lock_cost + c->locked_split * cfg.split_lock_cost;
    p[CYC_PF] = c->pf_trapped * cfg.prefetch_trap;
    p[CYC_WIN] = (c->win_spills + c->win_fills) * cfg.window_trap;
    uint64_t entries = 0; /* system mode: exception / trap-table entries, each charged trap_entry */
#pragma GCC unroll 8
    for (unsigned k = 0; k < 8; k++)
        entries += c->exceptions[k];
    p[CYC_ENTRY] = entries * cfg.trap_entry;
    p[CYC_WAIT] = c->wait_cycles;
    return p[CYC_IFETCH] + p[CYC_TLB] + p[CYC_STRADDLE] + p[CYC_UNAL_HW] + p[CYC_UNAL_TRAP] + p[CYC_LOCK] +
           p[CYC_PF] + p[CYC_WIN] + p[CYC_ENTRY] + p[CYC_WAIT];
}

uint64_t counters_serial(const Counters *c)
{
    uint64_t p[CYC_NPARTS];
    return serial_parts(c, p);
}

/* cycles: cpi * instructions + every penalty (docs/model.md); p[] receives the
 * breakdown (enum cyc_part) when not NULL. contention.c reads a vCPU's clock
 * through it. */
uint64_t counters_cycles(const Counters *c, uint64_t *p)
{
    uint64_t parts[CYC_NPARTS];
    parts[CYC_BASE] = round_cycles(cfg.cpi * (double)c->insns);
    uint64_t d_rmiss = c->l1d_load_misses + (cfg.l1d_write ? 0 : c->l1d_store_misses);
    uint64_t d_mem = d_rmiss - c->l1d_rmiss_l2hit - c->l1d_rmiss_l3hit;
    uint64_t l2lat = have_l2 ? cfg.l2_lat : 0, l3lat = have_l3 ? cfg.l3_lat : 0;
    /* core=ooo: the cycles the core stalled for data on its timeline (timing.c); in order: every
     * miss in full (the latency of the level that served it minus the L1 hit latency) */
    parts[CYC_DATA] = ooo_on ? (c->ooo_stall_q8 + 128) >> 8
                             : c->l1d_rmiss_l2hit * (l2lat - cfg.l1d_lat) + c->l1d_rmiss_l3hit * (l3lat - cfg.l1d_lat) +
                                   c->mem_cycles_d - d_mem * cfg.l1d_lat;
    uint64_t cycles = parts[CYC_BASE] + parts[CYC_DATA] + serial_parts(c, parts);
    if (p)
        memcpy(p, parts, sizeof parts);
    return cycles;
}

static void put_stats(Str *s, const Counters *c0, const char *ind)
{
    /* the leaves' accesses: each one DTLB access, a load or a store, an L1D hit */
    Counters f = *c0, *c = &f;
    f.dtlb_accesses += f.lean[0] + f.lean[1];
    f.loads += f.lean[0];
    f.l1d_load_hits += f.lean[0];
    f.stores += f.lean[1];
    f.l1d_store_hits += f.lean[1];
    f.lean[0] = f.lean[1] = 0;
    uint64_t p[CYC_NPARTS];
    uint64_t cycles = counters_cycles(c, p);
    uint64_t base = p[CYC_BASE], cyc_ifetch = p[CYC_IFETCH], cyc_data = p[CYC_DATA], cyc_tlb = p[CYC_TLB],
             cyc_straddle = p[CYC_STRADDLE], cyc_unal_hw = p[CYC_UNAL_HW], cyc_unal_trap = p[CYC_UNAL_TRAP],
             cyc_lock = p[CYC_LOCK], cyc_pf = p[CYC_PF], cyc_win = p[CYC_WIN], cyc_entry = p[CYC_ENTRY];

    sput(s, "%s\"instructions\": %" PRIu64 ",\n", ind, c->insns);
    sput(s, "%s\"rep_repeats\": %" PRIu64 ",\n", ind, c->rep_repeats);
    sput(s, "%s\"cycles\": %" PRIu64 ",\n", ind, cycles);
    sput(s,
         "%s\"cycles_breakdown\": {\"base\": %" PRIu64 ", \"ifetch\": %" PRIu64 ", \"data\": %" PRIu64
         ", \"tlb\": %" PRIu64 ", \"straddle\": %" PRIu64 ", \"unaligned_hw\": %" PRIu64
         ", \"unaligned_trap\": %" PRIu64 ", \"lock\": %" PRIu64 ", \"prefetch_trap\": %" PRIu64
         ", \"window_trap\": %" PRIu64 ", \"trap_entry\": %" PRIu64 "},\n",
         ind, base, cyc_ifetch, cyc_data, cyc_tlb, cyc_straddle, cyc_unal_hw, cyc_unal_trap, cyc_lock, cyc_pf,
         cyc_win, cyc_entry);
    if (cfg.lockstep) /* contention.c: the lock hand-offs and the waits of the timeline */
        contention_put_stats(s, c, p[CYC_WAIT], ind);
    sput(s,
         "%s\"l1i\": {\"accesses\": %" PRIu64 ", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64
         ", \"line_fetches\": %" PRIu64 "},\n",
         ind, c->l1i_hits + c->l1i_misses, c->l1i_hits, c->l1i_misses, c->l1i_fetches);
    sput(s,
         "%s\"l1d\": {\"accesses\": %" PRIu64 ", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64
         ", \"load_hits\": %" PRIu64 ", \"load_misses\": %" PRIu64 ", \"store_hits\": %" PRIu64
         ", \"store_misses\": %" PRIu64 ", \"writebacks\": %" PRIu64 "},\n",
         ind, c->l1d_load_hits + c->l1d_load_misses + c->l1d_store_hits + c->l1d_store_misses,
         c->l1d_load_hits + c->l1d_store_hits, c->l1d_load_misses + c->l1d_store_misses, c->l1d_load_hits,
         c->l1d_load_misses, c->l1d_store_hits, c->l1d_store_misses, c->l1d_writebacks);
    put_lower(s, ind, "l2", have_l2, c->l2_read_hits, c->l2_read_misses, c->l2_write_hits, c->l2_write_misses,
              c->l2_writebacks);
    put_lower(s, ind, "l3", have_l3, c->l3_read_hits, c->l3_read_misses, c->l3_write_hits, c->l3_write_misses,
              c->l3_writebacks);
    sput(s, "%s\"memory_reads_by_node\": [", ind);
    for (unsigned k = 0; k < cfg.numa_nodes; k++)
        sput(s, "%s%" PRIu64, k ? ", " : "", c->mem_reads[k]);
    sput(s, "],\n%s\"memory_writes_by_node\": [", ind);
    for (unsigned k = 0; k < cfg.numa_nodes; k++)
        sput(s, "%s%" PRIu64, k ? ", " : "", c->mem_writes[k]);
    sput(s, "],\n%s\"memory_read_cycles\": %" PRIu64 ",\n", ind, c->mem_cycles_i + c->mem_cycles_d);
    sput(s, "%s\"io_accesses\": %" PRIu64 ",\n", ind, c->io_accesses);
    sput(s, "%s\"itlb\": {\"accesses\": %" PRIu64 ", \"misses\": %" PRIu64 "},\n", ind, c->itlb_accesses,
         c->itlb_misses);
    sput(s, "%s\"dtlb\": {\"accesses\": %" PRIu64 ", \"misses\": %" PRIu64 "},\n", ind, c->dtlb_accesses,
         c->dtlb_misses);
    if (have_stlb)
        sput(s, "%s\"stlb\": {\"accesses\": %" PRIu64 ", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64 "},\n", ind,
             c->stlb_hits + c->stlb_misses, c->stlb_hits, c->stlb_misses);
    else
        sput(s, "%s\"stlb\": null,\n", ind);
    sput(s, "%s\"memory_accesses\": {\"loads\": %" PRIu64 ", \"stores\": %" PRIu64 "},\n", ind, c->loads,
         c->stores);
    sput(s, "%s\"straddling_accesses\": %" PRIu64 ",\n", ind, c->straddles);
    sput(s, "%s\"unaligned_accesses\": %" PRIu64 ",\n", ind, c->unaligned_hw + c->unaligned_trap);
    sput(s,
         "%s\"traps\": {\"unaligned\": %" PRIu64 ", \"window_spill\": %" PRIu64 ", \"window_fill\": %" PRIu64
         ", \"prefetch\": %" PRIu64 "},\n",
         ind, c->unaligned_trap, c->win_spills, c->win_fills, c->pf_trapped);
    sput(s, "%s\"locked\": {\"in_line\": %" PRIu64 ", \"split\": %" PRIu64 "},\n", ind, c->locked_inline,
         c->locked_split);
    sput(s,
         "%s\"prefetches\": {\"issued\": %" PRIu64 ", \"dropped\": %" PRIu64 ", \"trapped\": %" PRIu64
         ", \"unknown_address\": %" PRIu64 "},\n",
         ind, c->pf_issued, c->pf_dropped, c->pf_trapped, c->pf_unknown);
    if (cfg.trap_table) {
        sput(s, "%s\"trap_table_entries\": {", ind);
        for (int k = TK_UNALIGNED; k <= TK_OTHER; k++)
            sput(s, "%s\"%s\": %" PRIu64, k ? ", " : "", trap_kind_name[k], c->exceptions[k]);
        sput(s, "},\n");
    }
    if (system_mode && cfg.arch == ARCH_ARMV6)
        sput(s,
             "%s\"exceptions\": {\"undefined\": %" PRIu64 ", \"svc\": %" PRIu64 ", \"prefetch_abort\": %" PRIu64
             ", \"data_abort\": %" PRIu64 ", \"irq\": %" PRIu64 ", \"fiq\": %" PRIu64 "},\n",
             ind, c->exceptions[1], c->exceptions[2], c->exceptions[3], c->exceptions[4], c->exceptions[6],
             c->exceptions[7]);
    if (cfg.ctx_switch)
        sput(s, "%s\"context_switches\": %" PRIu64 ",\n", ind, c->ctx_switches);
    sput(s,
         "%s\"timing\": {\"core\": \"%s\", \"data_stall_cycles\": %" PRIu64 ", \"misses_overlapped\": %" PRIu64
         ", \"dependent_misses\": %" PRIu64 ", \"l1d_in_flight\": %" PRIu64 "},\n",
         ind, ooo_on ? "ooo" : "inorder", cyc_data, c->misses_overlapped, c->dependent_misses, c->l1d_inflight);
    sput(s,
         "%s\"hardware_prefetches\": {\"issued\": %" PRIu64 ", \"useful\": %" PRIu64 ", \"late\": %" PRIu64
         ", \"dropped\": %" PRIu64 ", \"l1d\": {\"issued\": %" PRIu64 ", \"useful\": %" PRIu64 ", \"late\": %" PRIu64
         "}, \"l2\": {\"issued\": %" PRIu64 ", \"useful\": %" PRIu64 ", \"late\": %" PRIu64
         "}, \"lookups_below\": {\"l2_hits\": %" PRIu64 ", \"l2_misses\": %" PRIu64 ", \"l3_hits\": %" PRIu64
         ", \"l3_misses\": %" PRIu64 "}},\n",
         ind, c->hwpf_issued[0] + c->hwpf_issued[1], c->hwpf_useful[0] + c->hwpf_useful[1],
         c->hwpf_late[0] + c->hwpf_late[1], c->hwpf_dropped, c->hwpf_issued[0], c->hwpf_useful[0], c->hwpf_late[0],
         c->hwpf_issued[1], c->hwpf_useful[1], c->hwpf_late[1], c->hwpf_l2_hits, c->hwpf_l2_misses, c->hwpf_l3_hits,
         c->hwpf_l3_misses);
    sput(s, "%s\"other_faults\": %" PRIu64 "\n", ind, c->other_faults);
}

void put_json_string(Str *s, const char *v)
{
    sput(s, "\"");
    for (; *v; v++) {
        unsigned char ch = (unsigned char)*v;
        if (ch == '"' || ch == '\\')
            sput(s, "\\%c", ch);
        else if (ch < 0x20)
            sput(s, "\\u%04x", ch);
        else
            sput(s, "%c", ch);
    }
    sput(s, "\"");
}

void plugin_exit(qemu_plugin_id_t id, void *p)
{
    Str s = {0};
    Counters total;
    memset(&total, 0, sizeof total);
    bool any_marker = false;
    for (unsigned i = 0; i < MAX_VCPUS; i++)
        if (vcpus[i]) {
            VCpu *v = vcpus[i];
            if (v->t && (!regions_only || v->open)) /* core=ooo: the last accesses complete (timing.c) */
                timing_drain(v, v->c.insns);
            if (audit_faults)
                tb_finalize(v, UINT64_MAX);
            v->cur_tb = NULL;
            any_marker |= v->any_marker;
            counters_add(&total, &v->c);
        }

    sput(&s, "{\n  \"tool\": \"trapline-model\",\n  \"format\": 1,\n");
    sput(&s, "  \"arch\": \"%s\",\n  \"qemu_target\": ", arch_names[cfg.arch]);
    put_json_string(&s, target_name);
    sput(&s, ",\n  \"system_emulation\": %s,\n", system_mode ? "true" : "false");
    put_options(&s);
    if (cfg.lockstep)
        contention_put_run(&s);
    sput(&s, "  \"roi_markers\": %s,\n", any_marker ? "true" : "false");
    sput(&s, "  \"regions\": [");
    bool first = true;
    static const char *const why[] = {"end_marker", "begin_marker", "exit"};
    for (unsigned i = 0; i < MAX_VCPUS; i++) {
        VCpu *v = vcpus[i];
        if (!v)
            continue;
        if (!any_marker) { /* the whole run is the region */
            v->snap = (Counters){0};
            v->open = true;
        }
        if (v->open)
            region_close(v, &v->c, 2);
        for (size_t r = 0; r < v->n_regions; r++) {
            sput(&s, "%s\n    {\n      \"vcpu\": %u,\n      \"index\": %zu,\n      \"marked\": %s,\n", first ? "" : ",",
                 i, r, any_marker ? "true" : "false");
            sput(&s, "      \"closed_by\": \"%s\",\n      \"seq\": %" PRIu64 ",\n      \"vcpu_node\": %u,\n",
                 why[v->closed_by[r]], v->seq[r], v->node);
            put_stats(&s, &v->regions[r], "      ");
            sput(&s, "    }");
            first = false;
        }
        if (v->n_overflow) {
            sput(&s, "%s\n    {\n      \"vcpu\": %u,\n      \"index\": \"overflow\",\n      \"regions\": %" PRIu64
                     ",\n", first ? "" : ",", i, v->n_overflow);
            put_stats(&s, &v->overflow, "      ");
            sput(&s, "    }");
            first = false;
        }
    }
    sput(&s, "\n  ],\n  \"total\": {\n");
    put_stats(&s, &total, "    ");
    sput(&s, "  }\n}\n");

    if (trace_fp) {
        fclose(trace_fp);
        trace_fp = NULL;
    }
    if (cfg.out) {
        /* to a temporary file renamed into place; a device or a FIFO (out=/dev/null) is written in
         * place: a rename would put a file there */
        struct stat st;
        bool in_place = stat(cfg.out, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s.tmp%d", cfg.out, (int)getpid());
        FILE *f = fopen(in_place ? cfg.out : tmp, "w");
        if (!f || fwrite(s.buf, 1, s.len, f) != s.len || fclose(f) || (!in_place && rename(tmp, cfg.out))) {
            fprintf(stderr, "trapline-model: cannot write %s: %s\n", cfg.out, strerror(errno));
            if (!in_place)
                unlink(tmp);
        }
    } else {
        fwrite(s.buf, 1, s.len, stderr); /* qemu_plugin_outs() is silent without -d plugin */
        fflush(stderr);
    }
    free(s.buf);
}
