# numa-first-touch: first-touch placement, binding after touching, and the
# bimodal case; skips (kind=skip reason=single_numa_node) on one-node hosts.
BINS += $(O)/numa-first-touch/numa
$(O)/numa-first-touch/numa: numa-first-touch/numa.c common/trapline.h
	$(tl_static)
