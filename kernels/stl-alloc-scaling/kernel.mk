# stl-alloc-scaling: a vector create/push/destroy loop split over T threads,
# with a one-mutex node allocator (stlport-like) or glibc malloc/free.
BINS += $(O)/stl-alloc-scaling/alloc-scaling
$(O)/stl-alloc-scaling/alloc-scaling: CFLAGS += -pthread
$(O)/stl-alloc-scaling/alloc-scaling: stl-alloc-scaling/alloc_scaling.c common/trapline.h
	$(tl_static)
