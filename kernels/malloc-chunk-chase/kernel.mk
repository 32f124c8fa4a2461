# malloc-chunk-chase: libmtmalloc-style chunk lists (walked from a hint to
# find a free slot) vs glibc malloc, under the long-lived/short-lived pattern.
BINS += $(O)/malloc-chunk-chase/chunk-chase
$(O)/malloc-chunk-chase/chunk-chase: malloc-chunk-chase/chunk_chase.c common/trapline.h
	$(tl_static)
