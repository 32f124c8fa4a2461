# armv6-unaligned: 32/64-bit loads from &buf[0] and &buf[1] as LDR (hardware),
# LDRD/LDM (kernel alignment fixup) and byte loads (packed struct).
BINS += $(O)/armv6-unaligned/unaligned
$(O)/armv6-unaligned/unaligned: armv6-unaligned/unaligned.c common/trapline.h
	$(tl_static)
