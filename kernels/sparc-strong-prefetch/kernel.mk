# sparc-strong-prefetch: 1,000,000 prefetches of address 0, strong (fcn 22)
# against weak (fcn 2).
BINS += $(O)/sparc-strong-prefetch/prefetch
$(O)/sparc-strong-prefetch/prefetch: sparc-strong-prefetch/prefetch.c common/trapline.h
	$(tl_static)
