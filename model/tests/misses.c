/*
 * misses - the second workload of model/bench-x86.sh: what a user's program that
 * misses the caches does to the model's speed. One 8-byte access per 64-byte line
 * over a buffer of 64 MiB (three times the 20 MB L3 of x86-2012-server): a
 * dependent pointer chase, four chases interleaved, an ascending stream, a gather
 * through an index array, a 4 KiB stride and a store stream, each over every line,
 * reps=<n> times (reps=25: about 640 M x86_64 instructions). Prints a checksum.
 * Build: gcc -O1 -static misses.c (model/bench-x86.sh).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE 64
#define LINES (1u << 20) /* 64 MiB */

struct node {
    struct node *next;
    char pad[LINE - sizeof(struct node *)];
};

static uint64_t state = 88172645463325252ull;
static uint32_t rnd(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (uint32_t)state;
}

int main(int argc, char **argv)
{
    long reps = argc > 1 && !strncmp(argv[1], "reps=", 5) ? atol(argv[1] + 5) : 25;
    struct node *buf = aligned_alloc(4096, (size_t)LINES * LINE);
    uint32_t *idx = malloc(LINES * sizeof *idx);
    if (!buf || !idx)
        return 1;
    memset(buf, 0, (size_t)LINES * LINE);
    for (uint32_t i = 0; i < LINES; i++)
        idx[i] = i;
    for (uint32_t i = LINES - 1; i > 0; i--) { /* Sattolo: one cycle through every line */
        uint32_t j = rnd() % i, t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
    for (uint32_t i = 0; i < LINES; i++)
        buf[idx[i]].next = &buf[idx[(i + 1) % LINES]];
    uint64_t sum = 0;
    const uint64_t *w = (const uint64_t *)buf;
    for (long r = 0; r < reps; r++) {
        struct node *p = &buf[idx[0]];
        for (uint32_t i = 0; i < LINES; i++) /* a dependent chase */
            p = p->next;
        struct node *q0 = &buf[idx[0]], *q1 = &buf[idx[LINES / 4]], *q2 = &buf[idx[LINES / 2]],
                    *q3 = &buf[idx[3 * (LINES / 4)]];
        for (uint32_t i = 0; i < LINES / 4; i++) { /* four chases interleaved */
            q0 = q0->next;
            q1 = q1->next;
            q2 = q2->next;
            q3 = q3->next;
        }
        for (uint32_t i = 0; i < LINES; i++) /* a stream */
            sum += w[(size_t)i * (LINE / 8) + 1];
        for (uint32_t i = 0; i < LINES; i++) /* a gather */
            sum += w[(size_t)idx[i] * (LINE / 8) + 2];
        for (uint32_t i = 0; i < LINES; i++) /* a 4 KiB stride */
            sum += w[(((size_t)i * 64 + i / (LINES / 64)) % LINES) * (LINE / 8) + 3];
        for (uint32_t i = 0; i < LINES; i++) /* a store stream */
            ((uint64_t *)buf)[(size_t)i * (LINE / 8) + 4] = i;
        /* where the chases ended, as node numbers (the same under any loader and allocator) */
        sum += (uint64_t)(p - buf) ^ (uint64_t)(q0 - buf) ^ (uint64_t)(q1 - buf) ^ (uint64_t)(q2 - buf) ^
               (uint64_t)(q3 - buf);
    }
    printf("%llu\n", (unsigned long long)sum);
    return 0;
}
