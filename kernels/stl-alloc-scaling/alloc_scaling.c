/*
 * stl-alloc-scaling - one allocator lock stops threads from scaling.
 *
 * From the method in shared/claims.md E11 (Gove, "Stlport4 and multithreaded
 * code"): a parallel loop of N = 10,000,000 iterations, each creating a
 * vector, pushing one element and destroying it. In C: the "vector" is a
 * {data, size, capacity} triple on the stack; push grows it from capacity 0
 * to 1, which allocates its buffer through the allocator; destroy frees it.
 * One allocation and one deallocation per iteration. The loop is split over
 * T pthreads (like an OpenMP static schedule), each doing N/T iterations.
 *
 * Allocators (allocator=):
 *   pool-lock  a node allocator like stlport's: requests up to 128 bytes are
 *              rounded up to 8 and served from per-size free lists, refilled
 *              20 nodes at a time from chunks obtained with malloc; ONE
 *              global mutex protects all the lists. Every allocation and
 *              every deallocation takes it, so threads serialise on it.
 *   glibc      malloc/free: per-thread tcache and per-thread arenas, no
 *              shared lock on this path.
 * Key lock= (pool-lock only): adaptive (default; PTHREAD_MUTEX_ADAPTIVE_NP
 * spins briefly before sleeping, like Solaris' adaptive mutexes that
 * stlport used there), plain (the default glibc mutex) or spin (a
 * test-and-test-and-set lock taken and released by an atomic exchange:
 * what a Solaris adaptive mutex does while its owner is running, which with
 * short critical sections and no more threads than CPUs is always; no
 * futex, so the timing model's lockstep lane orders it exactly).
 * Key capacity=off skips the parallel-capacity measurement (the model lane:
 * it would be hundreds of millions of modelled instructions). Key
 * prestart=on starts and joins one idle thread before measuring: under the
 * timing model's lockstep (model/plugin/contention.c) the turns begin at the
 * first region marker, and QEMU's one flush of its translations when a
 * process gets its first extra thread must happen before then (the 50 ms
 * sleep before the join lets the idle thread exit first, so that the join
 * runs the same code every time and the region starts from the same state).
 *
 * Samples: ops = iterations, ns = wall time of the whole loop for T threads
 * (thread creation and join included: tens of microseconds). Params:
 * threads=T allocator=X (and lock=Y for pool-lock).
 */
#include "trapline.h"
#include <pthread.h>
#include <unistd.h>

TL_ARGS({"allocator", "pool-lock", "[choice] pool-lock|glibc"},
        {"threads", "1", "[int 1..256] threads sharing the loop (1..256)"},
        {"iterations", "10000000", "[int 1..1000000000000] N: vector create/push/destroy iterations in all (quick: 200000)"},
        {"lock", "adaptive", "[choice] pool-lock mutex kind: adaptive|plain|spin"},
        {"capacity", "on", "[choice] with threads > 1, first measure the parallel capacity: on|off"},
        {"prestart", "off", "[choice] start and join one idle thread before measuring: on|off"});

/* ------------------------------------------------ pool-lock allocator */

#define POOL_ALIGN 8
#define POOL_MAX_BYTES 128
#define POOL_NLISTS (POOL_MAX_BYTES / POOL_ALIGN)
#define POOL_REFILL 20

union pool_node {
    union pool_node *next;
    char data[1];
};

static pthread_mutex_t pool_lock;
static int use_spin, spin_word; /* lock=spin */

static inline void pool_take(void)
{
    if (!use_spin) {
        pthread_mutex_lock(&pool_lock);
        return;
    }
    while (__atomic_exchange_n(&spin_word, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(&spin_word, __ATOMIC_RELAXED))
            ;
}

static inline void pool_give(void)
{
    if (use_spin) /* an atomic exchange, as glibc's lll_unlock */
        __atomic_exchange_n(&spin_word, 0, __ATOMIC_RELEASE);
    else
        pthread_mutex_unlock(&pool_lock);
}
static union pool_node *pool_free[POOL_NLISTS];
static char *pool_chunk, *pool_chunk_end; /* carved into nodes on refill */

static void pool_init(int adaptive)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    if (adaptive)
        pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&pool_lock, &a);
    pthread_mutexattr_destroy(&a);
}

/* Called with the lock held: put POOL_REFILL nodes of size sz on list idx. */
static void pool_refill(size_t idx, size_t sz)
{
    size_t want = sz * POOL_REFILL;
    if ((size_t)(pool_chunk_end - pool_chunk) < want) {
        size_t bytes = want * 16; /* a chunk feeds several refills */
        pool_chunk = malloc(bytes); /* not tl_malloc: inlined into the measured pool_alloc, kept as measured */
        if (!pool_chunk) {
            fprintf(stderr, "%s: out of memory\n", tl_exp);
            exit(1);
        }
        pool_chunk_end = pool_chunk + bytes; /* never returned, like the original */
    }
    for (int k = 0; k < POOL_REFILL; k++) {
        union pool_node *n = (union pool_node *)pool_chunk;
        pool_chunk += sz;
        n->next = pool_free[idx];
        pool_free[idx] = n;
    }
}

__attribute__((noinline)) static void *pool_alloc(size_t n)
{
    if (n > POOL_MAX_BYTES)
        return malloc(n);
    size_t sz = (n + POOL_ALIGN - 1) & ~(size_t)(POOL_ALIGN - 1);
    size_t idx = sz / POOL_ALIGN - 1;
    pool_take();
    if (!pool_free[idx])
        pool_refill(idx, sz);
    union pool_node *node = pool_free[idx];
    pool_free[idx] = node->next;
    pool_give();
    return node;
}

__attribute__((noinline)) static void pool_dealloc(void *p, size_t n)
{
    if (n > POOL_MAX_BYTES) {
        free(p);
        return;
    }
    size_t idx = ((n + POOL_ALIGN - 1) & ~(size_t)(POOL_ALIGN - 1)) / POOL_ALIGN - 1;
    union pool_node *node = p;
    pool_take();
    node->next = pool_free[idx];
    pool_free[idx] = node;
    pool_give();
}

/* ------------------------------------------------------------ vector */

struct vec {
    int *data;
    size_t size, cap;
};

static int use_pool;

static inline void *vec_alloc(size_t bytes)
{
    return use_pool ? pool_alloc(bytes) : malloc(bytes);
}

static inline void vec_dealloc(void *p, size_t bytes)
{
    if (use_pool)
        pool_dealloc(p, bytes);
    else
        free(p);
}

static void vec_push(struct vec *v, int x)
{
    if (v->size == v->cap) { /* grow: new buffer, copy, free the old one */
        size_t cap = v->cap ? 2 * v->cap : 1;
        int *d = vec_alloc(cap * sizeof(int));
        if (!d) {
            fprintf(stderr, "%s: out of memory\n", tl_exp);
            exit(1);
        }
        if (v->size)
            memcpy(d, v->data, v->size * sizeof(int));
        if (v->data)
            vec_dealloc(v->data, v->cap * sizeof(int));
        v->data = d;
        v->cap = cap;
    }
    v->data[v->size++] = x;
}

static void vec_destroy(struct vec *v)
{
    if (v->data)
        vec_dealloc(v->data, v->cap * sizeof(int));
    v->data = NULL;
    v->size = v->cap = 0;
}

/* One thread's share: create a vector, push one element, destroy it. */
__attribute__((noinline)) static uint64_t vector_loop(uint64_t iters, uint64_t first)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < iters; i++) {
        struct vec v = {0, 0, 0};
        vec_push(&v, (int)(first + i));
        sum += (uint64_t)v.data[0];
        TL_USE(v.data);
        vec_destroy(&v);
    }
    return sum;
}

/* ---------------------------------------------------------- threads */

struct worker {
    pthread_t tid;
    uint64_t iters, first, sum;
};

static void *worker_main(void *p)
{
    struct worker *w = p;
    w->sum = vector_loop(w->iters, w->first);
    return NULL;
}

/* How much parallel compute this machine gives T threads: the same pure
 * arithmetic loop on 1 thread, then on each of T threads at once;
 * capacity = T x time(1) / time(T) (T on an idle machine with T free cores,
 * about 1 where the "cores" share one physical core or the host is
 * oversubscribed). Printed as kind=info so a flat result can be read. */
static void *spin_main(void *p)
{
    uint64_t n = *(uint64_t *)p, x = 1;
    for (uint64_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + i;
        TL_USE(x);
    }
    return NULL;
}

static double spin_ns(int threads, uint64_t n)
{
    pthread_t tid[256];
    uint64_t t0 = tl_now_ns();
    for (int t = 1; t < threads; t++)
        pthread_create(&tid[t], NULL, spin_main, &n);
    spin_main(&n);
    for (int t = 1; t < threads; t++)
        pthread_join(tid[t], NULL);
    return (double)(tl_now_ns() - t0);
}

struct ctx {
    int threads;
    uint64_t iterations;
    struct worker *w;
    uint64_t sum;
};

static uint64_t body(void *vc)
{
    struct ctx *c = vc;
    uint64_t base = c->iterations / c->threads, extra = c->iterations % c->threads, first = 0;
    for (int t = 0; t < c->threads; t++) { /* a static schedule: contiguous blocks */
        c->w[t].iters = base + ((uint64_t)t < extra);
        c->w[t].first = first;
        first += c->w[t].iters;
    }
    for (int t = 1; t < c->threads; t++)
        if (pthread_create(&c->w[t].tid, NULL, worker_main, &c->w[t])) {
            fprintf(stderr, "%s: pthread_create failed\n", tl_exp);
            exit(1);
        }
    worker_main(&c->w[0]); /* the calling thread is thread 0, as in OpenMP */
    uint64_t sum = c->w[0].sum;
    for (int t = 1; t < c->threads; t++) {
        pthread_join(c->w[t].tid, NULL);
        sum += c->w[t].sum;
    }
    c->sum = sum;
    return c->iterations;
}

int main(int argc, char **argv)
{
    struct tl_opts o = tl_start("stl-alloc-scaling", argc, argv, args);
    const char *allocator = tl_choice(args, "allocator", "pool-lock|glibc");
    const char *lock = tl_choice(args, "lock", "adaptive|plain|spin");
    int capacity = !strcmp(tl_choice(args, "capacity", "on|off"), "on");
    long long threads = tl_int(args, "threads"), iterations = tl_quick_int(args, "iterations", o.quick, 200000);
    if (threads < 1 || threads > 256 || iterations < threads)
        tl_fail("need 1 <= threads <= 256 and iterations >= threads");
    use_pool = !strcmp(allocator, "pool-lock");
    if (use_pool)
        pool_init(!strcmp(lock, "adaptive"));
    use_spin = !strcmp(lock, "spin");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    tl_header("allocator=%s threads=%lld cpus_online=%ld iterations=%lld", allocator, threads, cpus, iterations);

    if (threads > 1 && capacity) {
        uint64_t spin = o.quick ? 2000000 : 20000000;
        spin_ns(1, spin / 10); /* warm up */
        double one = spin_ns(1, spin), all = spin_ns((int)threads, spin);
        tl_info("parallel_capacity=%.2f threads=%lld spin_1thread_ns=%.0f spin_allthreads_ns=%.0f",
                threads * one / all, threads, one, all);
    }

    if (!strcmp(tl_choice(args, "prestart", "on|off"), "on")) {
        pthread_t idle;
        if (pthread_create(&idle, NULL, spin_main, &(uint64_t){0}))
            tl_fail("prestart: pthread_create failed");
        usleep(50000); /* it has surely exited: the join finds it gone, the same code every time */
        pthread_join(idle, NULL);
    }

    struct ctx c = {.threads = (int)threads, .iterations = (uint64_t)iterations};
    c.w = calloc(threads, sizeof *c.w);
    char params[96];
    if (use_pool)
        snprintf(params, sizeof params, "threads=%lld allocator=%s lock=%s", threads, allocator, lock);
    else
        snprintf(params, sizeof params, "threads=%lld allocator=%s", threads, allocator);
    tl_measure(allocator, params, o.warmup, o.reps, body, &c);

    /* Every iteration pushed its own index: the sum is 0 + 1 + ... + N-1
     * (each element truncated to int, as pushed). */
    uint64_t want = 0;
    for (uint64_t i = 0; i < (uint64_t)iterations; i++)
        want += (uint64_t)(int)i;
    tl_check(allocator, params, "%s", c.sum == want ? "ok" : "mismatch");
    return c.sum == want ? 0 : 1;
}
