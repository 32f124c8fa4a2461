# sparc-misalign-trap: 2,000,000 misaligned 4-byte loads, as word loads that
# trap (with an optional SIGBUS emulator on sparc64) or as byte loads.
BINS += $(O)/sparc-misalign-trap/misalign
$(O)/sparc-misalign-trap/misalign: sparc-misalign-trap/misalign.c common/trapline.h
	$(tl_static)
# The gem5-freestanding flavour on sparc64 (a stock gem5) links it with the freestanding runtime
# (common/freestanding.mk).
TL_FREESTANDING_BINS += $(O)/sparc-misalign-trap/misalign
