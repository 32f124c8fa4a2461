/*
 * sparc-spill-fill - the two mutually recursive routines. They live in two
 * translation units, lib_a.c and lib_b.c (the original's "two libraries"),
 * so gcc cannot inline one into the other; each returns 1 + the other's
 * result, so neither call is a tail call (and kernel.mk adds
 * -fno-optimize-sibling-calls besides). On sparc64 every call therefore
 * executes one `save` and one `restore`.
 */
#ifndef SPILL_FILL_H
#define SPILL_FILL_H

/* depth >= 1: the number of nested calls; returns depth. */
long spill_a(long depth);
long spill_b(long depth);

#endif
