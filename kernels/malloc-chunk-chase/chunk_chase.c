/*
 * malloc-chunk-chase - a malloc whose free-slot search walks a linked list
 * of chunks, one cache miss (and often one TLB miss) per step.
 *
 * From the method in shared/claims.md E6 (Gove, "mtmalloc vs umem" and "Cost
 * of pointer chasing in libmtmalloc"): repeat R=100 times: allocate 100,000
 * objects of 512 bytes, odd-numbered ones onto a short-lived list and
 * even-numbered ones onto a long-lived list; then free the short-lived list.
 * The long-lived objects accumulate (R x 50,000 of them at the end) and stay
 * scattered through every chunk.
 *
 * The "chunk" allocator is our own small implementation of the size-class
 * chunk lists of Solaris libmtmalloc. What we took from the OpenSolaris /
 * illumos libmtmalloc source (usr/src/lib/libmtmalloc/common/mtmalloc.c and
 * mtmalloc_impl.h, the 2005-2007 versions, which are the ones a 2009 Solaris
 * 10 shipped) is the behaviour, not the code:
 *   - a request is rounded up to a power of two (16 .. 64 KiB) and one
 *     8-byte word is put in front of each buffer (OVERHEAD) holding the
 *     address of the chunk that owns it; free() reads it back from there.
 *     A 512-byte request therefore uses a 520-byte slot.
 *   - a chunk (mtmalloc "cache") is requestsize x 8 KiB (HUNKSIZE) of
 *     contiguous memory from morecore()/sbrk. It starts with its header
 *     (cache_t: lock, freelist, arena, nfree, size, span, next, hunks), then
 *     a free bitmap (1 = free, most significant bit first), then the arena
 *     of slots aligned to 32 bytes. The slot count is computed the way
 *     create_cache() does it: (span / size) / 8 bytes of bitmap, the arena
 *     after it, the slot count recomputed and rounded down to a multiple of
 *     8. requestsize 9 gives 136 slots of 520 bytes per 72 KiB chunk (the
 *     claim's "144 objects" is 72 KiB / 512 without the header, bitmap and
 *     per-buffer word); requestsize 30 gives 472.
 *   - a new chunk is linked in at the HEAD of the size class's list.
 *   - each size class keeps a hint: the chunk the last malloc used. The
 *     search starts at the hint and follows "next" while the chunk's free
 *     count is 0; at the end of the list it wraps around to the head and
 *     searches up to the hint; only when that finds nothing is a new chunk
 *     created. The hint is then set to the chunk found or created.
 *   - inside the chosen chunk the bitmap is scanned 32 bits at a time for
 *     the first free slot; the bit is cleared and the free count decremented.
 *   - free() sets the slot's bit again and increments the chunk's free
 *     count. Nothing else: a chunk is never unlinked, moved or returned.
 * Left out: the per-CPU copies of the lists (one thread here), the two
 * uncontended mutexes taken per malloc (kept as space in the header only),
 * oversize (> 64 KiB) requests, and the debug patterns.
 *
 * Why the walk grows: once all chunks are full, the hint is the newest chunk
 * at the head; when it fills, the next malloc follows "next" through every
 * older (full) chunk to the end of the list, wraps, finds nothing and adds a
 * chunk. Each round's frees put a few free slots back into recent chunks
 * only, so most of each round is spent creating chunks, each one costing a
 * walk of the whole list: the total is quadratic in the number of chunks.
 *
 * Variants (allocator=): chunk (key requestsize, default 9 as in mtmalloc),
 * glibc (malloc/free of the C library). One sample = one whole benchmark run
 * (R rounds); ops = mallocs. The heap is torn down untimed between runs
 * (tl_measure_setup). Counts printed per run: mallocs, walk_steps (number of
 * "next" pointers followed by all searches), chunks, peak_bytes (chunk
 * memory for chunk; heap arena + mmapped bytes for glibc) and
 * peak_live_bytes (requested bytes live at the peak).
 */
#include "trapline.h"
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

TL_ARGS({"allocator", "chunk", "[choice] chunk|glibc"},
        {"requestsize", "9", "[int 9..256] chunk allocator: chunk size in 8 KiB hunks (mtmalloc 9..256)"},
        {"rounds", "100", "[int 1..1000000] R: allocate/free-short rounds in one run (quick: 12)"},
        {"objects", "100000", "[int 2..100000000] objects allocated per round (quick: 10000)"},
        {"size", "512", "[int 16..65528] bytes per object (16..65528)"},
        {"verify", "0", "[int 0..1] 1 = fill every object and check it at free (slow; for tests)"});

/* ----------------------------------------------------- chunk allocator */

#define HUNKSIZE 8192
#define OVERHEAD 8 /* word in front of each buffer: the owning chunk */
#define MIN_CACHED_SHIFT 4
#define MAX_CACHED_SHIFT 16
#define ALIGN_UP(x, a) (((uintptr_t)(x) + ((uintptr_t)(a)-1)) & ~((uintptr_t)(a)-1))

/* mtmalloc's cache_t, field for field; the lock is only space here. */
struct chunk {
    uint64_t lock_space[3];   /* mutex_t mt_cache_lock (24 bytes) */
    unsigned char *freelist;  /* free bitmap, right after this header */
    unsigned char *arena;     /* first slot */
    size_t nfree;             /* free count: read at every step of the walk */
    size_t size;              /* slot size, OVERHEAD included */
    size_t span;              /* chunk bytes after the header */
    struct chunk *next;       /* next chunk: followed at every step */
    int hunks;                /* requestsize at creation */
};

struct heap {
    char *base;               /* reserved region; chunks are carved from it like sbrk */
    size_t reserved, used;
    long requestsize;
    struct chunk *head[MAX_CACHED_SHIFT - MIN_CACHED_SHIFT + 1];
    struct chunk *hint[MAX_CACHED_SHIFT - MIN_CACHED_SHIFT + 1];
    uint64_t walk_steps, chunks;
};

/* morecore: the region is one big reservation, handed out front to back. */
static void *heap_morecore(struct heap *h, size_t bytes)
{
    if (h->used + bytes > h->reserved) {
        fprintf(stderr, "%s: chunk region exhausted (%zu bytes reserved)\n", tl_exp, h->reserved);
        exit(1);
    }
    void *p = h->base + h->used;
    h->used += bytes;
    return p;
}

static void chunk_init(struct chunk *c, size_t size, long hunks)
{
    c->size = size;
    c->freelist = (unsigned char *)c + sizeof(struct chunk);
    c->span = hunks * HUNKSIZE - sizeof(struct chunk);
    c->hunks = hunks;
    long nbytes = (c->span / size) >> 3; /* bitmap bytes, first estimate */
    if (nbytes == 0) {                   /* < 8 slots: one bitmap byte */
        long n = 0;
        for (long left = c->span; left > (long)size; left -= size)
            n++;
        c->arena = (unsigned char *)ALIGN_UP(c->freelist + 8, 8);
        memset(c->freelist, 0, c->arena - c->freelist);
        c->nfree = n;
        unsigned char mask = 0;
        while (n--)
            mask |= 0x80 >> n;
        c->freelist[0] = mask;
    } else {
        c->arena = (unsigned char *)ALIGN_UP(c->freelist + nbytes, 32);
        long nblocks = (c->freelist + c->span - c->arena) / size;
        c->nfree = (nblocks >> 3) << 3;
        memset(c->freelist, 0, c->arena - c->freelist);
        memset(c->freelist, 0xff, nblocks >> 3);
    }
    c->next = NULL;
}

static inline uint32_t bitmap_word(const unsigned char *p)
{
    /* The bitmap is a byte string, most significant bit first; reading it
     * as a big-endian 32-bit word puts slot 0 in bit 31 (mtmalloc's FLIP_EM). */
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

__attribute__((noinline)) static void *chunk_malloc(struct heap *h, size_t bytes)
{
    int logsz = MIN_CACHED_SHIFT;
    while (bytes > ((size_t)1 << logsz))
        logsz++;
    int bucket = logsz - MIN_CACHED_SHIFT;
    uint64_t steps = 0;

    /* The walk: from the hint, follow "next" while the free count is 0. */
    struct chunk *c = h->hint[bucket];
    while (c != NULL && c->nfree == 0) {
        c = c->next;
        steps++;
    }
    if (c == NULL) { /* wrap around: from the head up to the hint */
        struct chunk *hint = h->hint[bucket];
        c = h->head[bucket];
        while (c != NULL && c != hint && c->nfree == 0) {
            c = c->next;
            steps++;
        }
        if (c == hint)
            c = NULL;
    }
    h->walk_steps += steps;
    if (c == NULL) { /* no free slot anywhere: a new chunk at the head */
        c = heap_morecore(h, h->requestsize * HUNKSIZE);
        chunk_init(c, ((size_t)1 << logsz) + OVERHEAD, h->requestsize);
        c->next = h->head[bucket];
        h->head[bucket] = c;
        h->chunks++;
    }
    h->hint[bucket] = c;

    /* First free slot: scan the bitmap a 32-bit word at a time. */
    unsigned char *w = c->freelist;
    while (w < c->arena && bitmap_word(w) == 0)
        w += 4;
    int i = __builtin_clz(bitmap_word(w));
    long slot = (long)(w - c->freelist) * 8 + i;
    w[i >> 3] &= ~(0x80 >> (i & 7));
    c->nfree--;

    unsigned char *ret = c->arena + slot * c->size;
    *(struct chunk **)ret = c; /* owner, for free() */
    return ret + OVERHEAD;
}

__attribute__((noinline)) static void chunk_free(void *p)
{
    unsigned char *mem = (unsigned char *)p - OVERHEAD;
    struct chunk *c = *(struct chunk **)mem;
    long slot = (mem - c->arena) / (long)c->size;
    unsigned char mask = 0x80 >> (slot & 7);
    if (c->freelist[slot >> 3] & mask) {
        fprintf(stderr, "%s: double free of %p\n", tl_exp, p);
        abort();
    }
    c->freelist[slot >> 3] |= mask;
    c->nfree++;
}

/* ---------------------------------------------------------- benchmark */

struct obj {
    struct obj *next; /* list link in the object's first word */
    uint64_t seq;     /* written only with verify=1 */
};

struct ctx {
    int chunk;         /* 1 = chunk allocator, 0 = glibc */
    long rounds, objects;
    size_t size;
    int verify;
    struct heap heap;
    struct obj *longlived; /* left by a run, freed by the next setup */
    int have_run;
    /* per-run facts (identical from run to run for the chunk allocator) */
    uint64_t walk_steps, chunks, peak_bytes;
};

/* verify=1: each object holds its sequence number and a fill derived from
 * it; an allocator that hands out overlapping slots breaks one of them. */
static void fill(struct obj *o, size_t size, uint64_t seq)
{
    o->seq = seq;
    memset((char *)o + sizeof(struct obj), (int)(seq * 131 % 251) + 1, size - sizeof(struct obj));
}

static void verify_obj(const struct obj *o, size_t size)
{
    const unsigned char *b = (const unsigned char *)o + sizeof(struct obj);
    unsigned char want = (unsigned char)(o->seq * 131 % 251) + 1;
    for (size_t k = 0; k < size - sizeof(struct obj); k++)
        if (b[k] != want) {
            fprintf(stderr, "%s: object %" PRIu64 " overwritten at byte %zu\n", tl_exp, o->seq, k);
            exit(1);
        }
}

/* One benchmark run: R rounds of allocate N, free the odd half. */
__attribute__((noinline)) static uint64_t run(struct ctx *c)
{
    struct heap *h = &c->heap;
    struct obj *longl = NULL;
    uint64_t seq = 0;
    for (long r = 0; r < c->rounds; r++) {
        struct obj *shortl = NULL;
        for (long i = 0; i < c->objects; i++, seq++) {
            struct obj *o = c->chunk ? chunk_malloc(h, c->size) : malloc(c->size);
            if (!o) {
                fprintf(stderr, "%s: out of memory after %" PRIu64 " objects\n", tl_exp, seq);
                exit(1);
            }
            if (c->verify)
                fill(o, c->size, seq);
            if (i & 1) {
                o->next = shortl;
                shortl = o;
            } else {
                o->next = longl;
                longl = o;
            }
        }
        while (shortl) {
            struct obj *next = shortl->next;
            if (c->verify)
                verify_obj(shortl, c->size);
            if (c->chunk)
                chunk_free(shortl);
            else
                free(shortl);
            shortl = next;
        }
    }
    c->longlived = longl;
    return (uint64_t)c->rounds * c->objects;
}

static uint64_t body(void *vc)
{
    struct ctx *c = vc;
    c->heap.walk_steps = 0;
    c->heap.chunks = 0;
    uint64_t ops = run(c);
    c->walk_steps = c->heap.walk_steps;
    c->chunks = c->heap.chunks;
    c->have_run = 1;
    return ops;
}

/* Untimed, before every run: record the previous run's peak, then free
 * everything it left so that each run starts from an empty heap. */
static void teardown(void *vc)
{
    struct ctx *c = vc;
    if (!c->have_run)
        return;
    if (c->verify) {
        uint64_t n = 0;
        for (struct obj *o = c->longlived; o; o = o->next, n++)
            verify_obj(o, c->size);
        if (n != (uint64_t)c->rounds * (c->objects - c->objects / 2)) {
            fprintf(stderr, "%s: %" PRIu64 " long-lived objects, expected %" PRIu64 "\n", tl_exp, n,
                    (uint64_t)c->rounds * (c->objects - c->objects / 2));
            exit(1);
        }
    }
    if (c->chunk) {
        c->peak_bytes = c->heap.used;
        /* Start again at the bottom of the region. The pages stay mapped
         * (as glibc keeps its heap), so only the first run takes the page
         * faults; chunk_init clears each bitmap itself. */
        c->heap.used = 0;
        memset(c->heap.head, 0, sizeof c->heap.head);
        memset(c->heap.hint, 0, sizeof c->heap.hint);
    } else {
        struct mallinfo2 mi = mallinfo2(); /* arena never shrank below the peak: */
        c->peak_bytes = mi.arena + mi.hblkhd; /* long-lived objects pin it */
        for (struct obj *o = c->longlived, *next; o; o = next) {
            next = o->next;
            free(o);
        }
    }
    c->longlived = NULL;
    c->have_run = 0;
}

int main(int argc, char **argv)
{
    struct tl_opts o = tl_start("malloc-chunk-chase", argc, argv, args);
    const char *variant = tl_choice(args, "allocator", "chunk|glibc");
    struct ctx c = {.chunk = !strcmp(variant, "chunk")};
    c.rounds = tl_quick_int(args, "rounds", o.quick, 12);
    c.objects = tl_quick_int(args, "objects", o.quick, 10000);
    long long size = tl_int(args, "size");
    c.verify = tl_int(args, "verify");
    c.heap.requestsize = tl_int(args, "requestsize");
    if (c.rounds < 1 || c.objects < 2 || size < (long long)sizeof(struct obj) ||
        size > (1 << MAX_CACHED_SHIFT) - OVERHEAD || c.heap.requestsize < 9 || c.heap.requestsize > 256)
        tl_fail("need rounds >= 1, objects >= 2, 16 <= size <= 65528, 9 <= requestsize <= 256");
    c.size = size;

    /* Geometry of one chunk, from a trial init in scratch memory. */
    int logsz = MIN_CACHED_SHIFT;
    while ((size_t)size > ((size_t)1 << logsz))
        logsz++;
    size_t slot = ((size_t)1 << logsz) + OVERHEAD, chunk_bytes = c.heap.requestsize * HUNKSIZE;
    struct chunk *trial = tl_aligned_alloc(HUNKSIZE, chunk_bytes);
    chunk_init(trial, slot, c.heap.requestsize);
    uint64_t per_chunk = trial->nfree;
    free(trial);

    /* Memory: the long-lived objects of every round plus one round's
     * short-lived ones are live at the end of the last allocation phase. */
    uint64_t peak_live = (uint64_t)(c.rounds - 1) * (c.objects - c.objects / 2) + c.objects;
    uint64_t need = c.chunk ? ((peak_live + per_chunk - 1) / per_chunk + 1) * chunk_bytes
                            : peak_live * ALIGN_UP(size + 8, 16);
    uint64_t phys = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    tl_header("size=%lld slot_bytes=%zu chunk_bytes=%zu objs_per_chunk=%" PRIu64 " rounds=%ld objects=%ld "
              "peak_live_objects=%" PRIu64 " expected_peak_bytes=%" PRIu64 " phys_bytes=%" PRIu64,
              size, c.chunk ? slot : (size_t)0, c.chunk ? chunk_bytes : (size_t)0, c.chunk ? per_chunk : 0, c.rounds,
              c.objects, peak_live, need, phys);
    if (need > phys / 4 * 3) {
        tl_skip(variant, "not_enough_memory");
        return 0;
    }
    if (sizeof(void *) == 4 && need > (1ull << 31)) {
        tl_skip(variant, "address_space_32bit");
        return 0;
    }
    if (c.chunk) {
        c.heap.reserved = need + chunk_bytes;
        c.heap.base = mmap(NULL, c.heap.reserved + HUNKSIZE, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (c.heap.base == MAP_FAILED) {
            tl_skip(variant, "mmap_failed");
            return 0;
        }
        c.heap.base = (char *)ALIGN_UP(c.heap.base, HUNKSIZE); /* mtmalloc aligns brk to HUNKSIZE */
    }

    char params[160];
    if (c.chunk)
        snprintf(params, sizeof params, "requestsize=%ld rounds=%ld objects=%ld size=%lld", c.heap.requestsize,
                 c.rounds, c.objects, size);
    else
        snprintf(params, sizeof params, "rounds=%ld objects=%ld size=%lld", c.rounds, c.objects, size);
    tl_measure_setup(variant, params, o.warmup, o.reps, teardown, body, &c);
    teardown(&c); /* records the last run's peak */

    uint64_t mallocs = (uint64_t)c.rounds * c.objects;
    tl_count(variant, "mallocs", mallocs, params);
    if (c.chunk) {
        tl_count(variant, "walk_steps", c.walk_steps, params);
        tl_count(variant, "chunks", c.chunks, params);
    }
    tl_count(variant, "peak_bytes", c.peak_bytes, params);
    tl_count(variant, "peak_live_bytes", peak_live * (uint64_t)size, params);
    return 0;
}
