# miss-overlap: the validation experiment of the timing model's overlap (nine access patterns).
BINS += $(O)/miss-overlap/miss-overlap
$(O)/miss-overlap/miss-overlap: miss-overlap/miss_overlap.c common/trapline.h
	$(tl_static)
# it runs on the host, the model (user mode) and gem5 (SE mode), never in a guest: not in the guest images
HOST_ONLY += miss-overlap
