/*
 * contention.c - threads on several vCPUs contending for one lock
 * (lockstep=on; user mode only). Nothing here runs with lockstep=off: its
 * callbacks are registered only when it is on.
 *
 * The rest of the model gives each vCPU its own counters and so its own
 * modelled clock (clock = the cycles its counters add up to, stats.c
 * counters_cycles, plus the cycle at which its thread was created). Under
 * qemu-user each guest thread is a host thread, so guest threads really run
 * in parallel and the order in which they take a lock is the host's. Here the
 * host order is replaced by the model's:
 *
 *  - a baton: one vCPU runs guest code at a time, the one with the lowest
 *    modelled clock (ties: the lower vCPU index). A vCPU checks before every
 *    locked read-modify-write (an exec callback on the instruction, which
 *    fires before it executes) and at the first block after every
 *    sync_quantum instructions; if another vCPU has a lower clock it hands
 *    the baton over and waits. So locked RMWs happen in the order of their
 *    modelled times, exactly, and plain loads and stores (a spinning thread
 *    reading a lock word) in that order to within sync_quantum instructions.
 *  - a line's hand-off: a locked RMW of a line whose last locked RMW was
 *    another vCPU's waits until that RMW has completed on the other vCPU's
 *    clock, and then transfer_lat cycles while the line comes over (the
 *    machine's cache-to-cache latency, coherence.transfer_latency). The wait
 *    is added to the vCPU's counters (wait_cycles, one of its cycles), and the
 *    hand-off counted (handoffs).
 *  - system calls: a vCPU in a system call gives the baton up. A futex wait
 *    may block for as long as another thread likes, so the vCPU leaves the
 *    schedule (BLOCKED) until it returns; any other call returns by itself, so
 *    the vCPUs with higher clocks wait for it (SYS). A futex wake records the
 *    waker's clock on that address, and so does a thread's exit on its
 *    clear-child-tid address (what pthread_join waits on); a vCPU coming back
 *    from a futex wait catches up to that clock (a join waits for the joined
 *    thread's last cycle). A thread created by clone starts at its parent's
 *    clock.
 *
 * With these rules the interleaving of a program whose threads synchronise
 * by locked RMWs and spinning does not depend on the host: the same run gives
 * the same counts (tests/test_87_stl_model.py checks two runs). What stays
 * the host's: a futex wait that returns EAGAIN because the value changed
 * before the host kernel looked (a few instructions), and anything the
 * baton's safety valve lets through: a vCPU that waits over 10 s of host time
 * for the baton (a QEMU-internal exclusive section, a system call that blocks
 * but is not a futex wait) takes it anyway and the run reports it
 * (lockstep.timeouts in the stats). Not modelled: coherence misses of plain
 * loads and stores (a line another vCPU wrote is still a hit in this vCPU's
 * caches, which are private), the cost of the system calls themselves (the
 * host kernel does them), and any sharing of caches between vCPUs.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "model.h"

enum { ST_NONE, ST_READY, ST_RUN, ST_SYS, ST_BLOCKED, ST_GONE };
static const char *const st_name[] = {"none", "ready", "running", "syscall", "blocked", "gone"};

typedef struct {
    int st;
    int64_t base;        /* clock = base + counters_cycles(counters) */
    uint64_t clk;        /* the clock at the last look, under mu */
    uint64_t next_sync;  /* instruction count of the next quantum check */
    uint64_t futex_addr; /* BLOCKED: the address waited on */
    uint64_t tid_addr[2]; /* candidates for the clear-child-tid address (clone's 4th and 5th argument) */
    uint64_t syncs, switches;
    bool fresh; /* created, has not had the turn yet: its first block waits at its start clock */
} Sync;

static Sync sy[MAX_VCPUS];
static unsigned n_sy; /* highest vCPU index seen + 1 */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int holder = -1;
static uint64_t timeouts;
/* what a full table could not hold (lockstep.lines_dropped, .events_dropped):
 * a hand-off or a wake not modelled, said on stderr once and counted */
static uint64_t lines_dropped, events_dropped;
/* a clone in flight: the child starts at the parent's clock */
static uint64_t spawn_clk, spawn_tid[2];

/* The last locked RMW of each line: which vCPU, and its clock when the RMW
 * completed. Open addressing; lock lines are few. */
#define LINES 4096
static struct {
    uint64_t line; /* line + 1; 0 = empty */
    int owner;
    uint64_t rel;
} lines[LINES];

/* futex events: the latest clock at which an address was woken (a futex
 * wake, or a thread's exit on its clear-child-tid address) */
#define EVENTS 256
static struct {
    uint64_t addr; /* 0 = empty */
    uint64_t clk;
} events[EVENTS];

static int64_t nr_futex, nr_exit, nr_exit_group, nr_clone, nr_clone3;
/* the turns begin at the first region marker (any vCPU's): before it threads
 * run freely (their states are tracked), so that QEMU's one flush of every
 * translation when the first extra thread starts (linux-user do_fork,
 * CF_PARALLEL; safe work, run in an exclusive section that waits for every
 * vCPU to leave its execution loop) happens while nobody waits for a turn
 * inside that loop. A kernel that runs threads in its measured region starts
 * one before it (stl-alloc-scaling: a warm-up repetition). */
static bool active;

static bool is_active(unsigned vi)
{
    if (LIKELY(__atomic_load_n(&active, __ATOMIC_RELAXED)))
        return true;
    if (!vcpus[vi]->any_marker)
        return false;
    __atomic_store_n(&active, true, __ATOMIC_RELAXED);
    return true;
}

static inline uint64_t clock_of(unsigned vi)
{
    return (uint64_t)(sy[vi].base + (int64_t)counters_cycles(&vcpus[vi]->c, NULL));
}

static void event_put(uint64_t addr, uint64_t clk)
{
    if (!addr)
        return;
    unsigned h = (unsigned)((addr * 0x9e3779b97f4a7c15ull) >> 56) % EVENTS;
    for (unsigned i = 0; i < EVENTS; i++, h = (h + 1) % EVENTS)
        if (!events[h].addr || events[h].addr == addr) {
            events[h].addr = addr;
            if (clk > events[h].clk)
                events[h].clk = clk;
            return;
        }
    if (!events_dropped++)
        fprintf(stderr, "trapline-model: lockstep: the futex event table is full (%d addresses); a thread woken "
                        "through another address does not wait for its waker's clock (lockstep.events_dropped)\n",
                EVENTS);
}

static uint64_t event_get(uint64_t addr)
{
    unsigned h = (unsigned)((addr * 0x9e3779b97f4a7c15ull) >> 56) % EVENTS;
    for (unsigned i = 0; i < EVENTS && events[h].addr; i++, h = (h + 1) % EVENTS)
        if (events[h].addr == addr)
            return events[h].clk;
    return 0;
}

/* Under mu: vi may run now (no schedulable vCPU has a lower (clock, index)). */
static bool may_run(unsigned vi)
{
    for (unsigned u = 0; u < n_sy; u++) {
        if (u == vi || (sy[u].st != ST_READY && sy[u].st != ST_SYS))
            continue;
        if (sy[u].clk < sy[vi].clk || (sy[u].clk == sy[vi].clk && u < vi))
            return false;
    }
    return true;
}

/* Under mu: wait for the baton (vi's clk is up to date). */
static void acquire(unsigned vi)
{
    sy[vi].st = ST_READY;
    pthread_cond_broadcast(&cv);
    while (holder != -1 || !may_run(vi)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 10;
        if (pthread_cond_timedwait(&cv, &mu, &ts) == ETIMEDOUT) {
            if (!timeouts++) {
                fprintf(stderr, "trapline-model: lockstep: vCPU %u waited 10 s for its turn; it runs anyway "
                                "(the run is no longer deterministic: lockstep.timeouts); holder %d, vCPUs:", vi,
                        holder);
                for (unsigned u = 0; u < n_sy; u++)
                    fprintf(stderr, " %u:%s@%" PRIu64, u, st_name[sy[u].st], sy[u].clk);
                fprintf(stderr, "\n");
            }
            break;
        }
    }
    holder = (int)vi;
    sy[vi].st = ST_RUN;
}

static void release(unsigned vi, int st)
{
    sy[vi].st = st;
    if (holder == (int)vi)
        holder = -1;
    pthread_cond_broadcast(&cv);
}

/* A scheduling point of the running vCPU vi: hand over if another is due. */
static void sync_point(unsigned vi)
{
    pthread_mutex_lock(&mu);
    sy[vi].clk = clock_of(vi);
    sy[vi].syncs++;
    if (sy[vi].st != ST_RUN || !may_run(vi)) {
        if (sy[vi].st == ST_RUN)
            sy[vi].switches++;
        release(vi, ST_READY);
        acquire(vi);
    }
    pthread_mutex_unlock(&mu);
}

/* ------------------------------------------------------------ callbacks */

static void lk_tb(unsigned int vi, void *ud)
{
    (void)ud;
    if (UNLIKELY(!vcpus[vi]))
        return;
    Sync *s = &sy[vi];
    if (UNLIKELY(!is_active(vi))) {
        s->fresh = false; /* ran before the turns began: its clock is its counters' */
        return;
    }
    uint64_t insns = vcpus[vi]->c.insns;
    if (LIKELY(s->st == ST_RUN && insns < s->next_sync))
        return;
    s->next_sync = insns + cfg.sync_quantum;
    if (UNLIKELY(s->fresh)) {
        /* a new thread's first block (already counted by tb_exec) waits at the
         * clock it was created at */
        pthread_mutex_lock(&mu);
        s->fresh = false;
        acquire(vi);
        pthread_mutex_unlock(&mu);
        return;
    }
    sync_point(vi);
}

/* before a locked RMW executes */
static void lk_insn(unsigned int vi, void *ud)
{
    (void)ud;
    if (vcpus[vi] && is_active(vi))
        sync_point(vi);
}

/* after a locked RMW's access (the model's mem_exec, registered first, has
 * counted it): the line's hand-off */
static void lk_mem(unsigned int vi, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud)
{
    (void)ud;
    if (((info >> 16) & 3) == 2 || !vcpus[vi] || !is_active(vi)) /* the write half of a split RMW */
        return;
    VCpu *v = vcpus[vi];
    uint64_t line = (vaddr >> l1d_shift) + 1;
    pthread_mutex_lock(&mu);
    unsigned h = (unsigned)((line * 0x9e3779b97f4a7c15ull) >> 52) % LINES, i;
    for (i = 0; i < LINES && lines[h].line && lines[h].line != line; i++)
        h = (h + 1) % LINES;
    if (i < LINES) {
        uint64_t now = clock_of(vi);
        if (lines[h].line == line && lines[h].owner != (int)vi) {
            uint64_t start = lines[h].rel > now ? lines[h].rel : now;
            v->c.wait_cycles += start - now + cfg.transfer_lat;
            v->c.handoffs++;
            now = start + cfg.transfer_lat;
        }
        lines[h].line = line;
        lines[h].owner = (int)vi;
        lines[h].rel = now;
    } else if (!lines_dropped++) {
        fprintf(stderr, "trapline-model: lockstep: the lock-line table is full (%d lines); a locked RMW of "
                        "another line is not handed off (lockstep.lines_dropped)\n", LINES);
    }
    sy[vi].clk = clock_of(vi);
    pthread_mutex_unlock(&mu);
}

static void lk_syscall(qemu_plugin_id_t id, unsigned int vi, int64_t num, uint64_t a1, uint64_t a2, uint64_t a3,
                       uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7, uint64_t a8)
{
    (void)id, (void)a3, (void)a6, (void)a7, (void)a8;
    if (!vcpus[vi])
        return;
    pthread_mutex_lock(&mu);
    Sync *s = &sy[vi];
    s->clk = clock_of(vi);
    if (num == nr_exit || num == nr_exit_group) {
        event_put(s->tid_addr[0], s->clk);
        event_put(s->tid_addr[1], s->clk);
        release(vi, ST_GONE);
    } else if (num == nr_futex && ((a2 & 127) == 0 || (a2 & 127) == 9)) { /* FUTEX_WAIT, FUTEX_WAIT_BITSET */
        s->futex_addr = a1;
        release(vi, ST_BLOCKED);
    } else {
        if (num == nr_futex)
            event_put(a1, s->clk); /* a wake (or another futex operation) at this clock */
        if (num == nr_clone || num == nr_clone3) {
            spawn_clk = s->clk;
            spawn_tid[0] = num == nr_clone ? a4 : 0; /* clone3's arguments are in guest memory */
            spawn_tid[1] = num == nr_clone ? a5 : 0;
        }
        release(vi, ST_SYS);
    }
    pthread_mutex_unlock(&mu);
}

/* Back from a system call: the vCPU takes its turn at its next block (lk_tb),
 * not here. QEMU may have safe work queued for it (linux-user's do_fork flushes
 * every translation when the first extra thread starts, CF_PARALLEL), which it
 * runs before that block in an exclusive section that waits for every other
 * vCPU to leave its execution loop; a vCPU holding the turn there would
 * deadlock with one waiting for the turn inside its loop. */
static void lk_syscall_ret(qemu_plugin_id_t id, unsigned int vi, int64_t num, int64_t ret)
{
    (void)id, (void)num, (void)ret;
    if (!vcpus[vi])
        return;
    pthread_mutex_lock(&mu);
    Sync *s = &sy[vi];
    if (s->st == ST_BLOCKED) {
        uint64_t woken = event_get(s->futex_addr), now = clock_of(vi);
        if (woken > now)
            vcpus[vi]->c.wait_cycles += woken - now;
    }
    s->clk = clock_of(vi);
    release(vi, ST_READY);
    pthread_mutex_unlock(&mu);
}

/* ------------------------------------------------------------ hooks */

void contention_vcpu_init(unsigned vi)
{
    if (!cfg.lockstep)
        return;
    pthread_mutex_lock(&mu);
    Sync *s = &sy[vi];
    uint64_t start = n_sy ? spawn_clk : 0; /* the first vCPU starts at 0; a thread at its parent's clock */
    s->base = (int64_t)start - (int64_t)counters_cycles(&vcpus[vi]->c, NULL);
    s->clk = start;
    s->tid_addr[0] = n_sy ? spawn_tid[0] : 0;
    s->tid_addr[1] = n_sy ? spawn_tid[1] : 0;
    s->next_sync = 0;
    s->fresh = true;
    s->st = ST_READY;
    if (vi + 1 > n_sy)
        n_sy = vi + 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

void contention_tb_trans(struct qemu_plugin_tb *tb, const TBDesc *t)
{
    if (!cfg.lockstep)
        return;
    qemu_plugin_register_vcpu_tb_exec_cb(tb, lk_tb, QEMU_PLUGIN_CB_NO_REGS, NULL);
    for (size_t i = 0; i < t->n_insns; i++) {
        if (!t->insn[i].locked)
            continue;
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        qemu_plugin_register_vcpu_insn_exec_cb(insn, lk_insn, QEMU_PLUGIN_CB_NO_REGS, NULL);
        qemu_plugin_register_vcpu_mem_cb(insn, lk_mem, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, NULL);
    }
}

int contention_install(qemu_plugin_id_t id)
{
    if (!cfg.lockstep)
        return 0;
    if (system_mode)
        return fail("lockstep=on: user mode only (under qemu-system a guest kernel schedules the threads); "
                    "valid here: lockstep=off");
    if (cfg.fast_forward)
        return fail("lockstep=on needs fast_forward=0 (the clocks count from the start); valid: fast_forward=0");
    /* system call numbers: Linux's asm/unistd_64.h (x86_64), arch/sparc/include/uapi/asm/unistd.h
     * (sparc64), arch/arm/tools/syscall.tbl (EABI) */
    switch (cfg.arch) {
    case ARCH_X86_64: nr_futex = 202; nr_exit = 60; nr_exit_group = 231; nr_clone = 56; break;
    case ARCH_SPARC64: nr_futex = 142; nr_exit = 1; nr_exit_group = 188; nr_clone = 217; break;
    case ARCH_ARMV6: nr_futex = 240; nr_exit = 1; nr_exit_group = 248; nr_clone = 120; break;
    }
    nr_clone3 = 435;
    qemu_plugin_register_vcpu_syscall_cb(id, lk_syscall);
    qemu_plugin_register_vcpu_syscall_ret_cb(id, lk_syscall_ret);
    return 0;
}

/* ------------------------------------------------------------ output */

void contention_put_stats(Str *s, const Counters *c, uint64_t wait, const char *ind)
{
    sput(s, "%s\"contention\": {\"wait_cycles\": %" PRIu64 ", \"handoffs\": %" PRIu64 "},\n", ind, wait,
         c->handoffs);
}

void contention_put_run(Str *s)
{
    uint64_t syncs = 0, switches = 0;
    sput(s, "  \"lockstep\": {\"vcpus\": %u, \"clocks\": [", n_sy);
    for (unsigned i = 0; i < n_sy; i++) {
        syncs += sy[i].syncs;
        switches += sy[i].switches;
        sput(s, "%s%" PRIu64, i ? ", " : "", vcpus[i] ? clock_of(i) : 0);
    }
    sput(s, "], \"syncs\": %" PRIu64 ", \"switches\": %" PRIu64 ", \"timeouts\": %" PRIu64
            ", \"lines_dropped\": %" PRIu64 ", \"events_dropped\": %" PRIu64 "},\n",
         syncs, switches, timeouts, lines_dropped, events_dropped);
}
