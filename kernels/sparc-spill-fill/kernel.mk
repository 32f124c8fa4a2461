# sparc-spill-fill: two routines in two compilation units (the original's two
# libraries) recursing into each other to depth N, so on SPARC nearly every
# call spills a register window and nearly every return fills one.
# -fno-optimize-sibling-calls: no call may become a jump (each must `save`).
BINS += $(O)/sparc-spill-fill/spill-fill
$(O)/sparc-spill-fill/spill-fill: CFLAGS += -fno-optimize-sibling-calls
$(O)/sparc-spill-fill/spill-fill: sparc-spill-fill/spill_fill.c sparc-spill-fill/lib_a.c sparc-spill-fill/lib_b.c \
                                  sparc-spill-fill/spill_fill.h common/trapline.h
	$(tl_static)
# The gem5-freestanding flavour on sparc64 (a stock gem5) links it with the freestanding runtime
# (common/freestanding.mk).
TL_FREESTANDING_BINS += $(O)/sparc-spill-fill/spill-fill
