# x86-split-lock: plain vs locked add at every offset of a cache line, and the
# packed-struct array of the production bug.
BINS += $(O)/x86-split-lock/split-lock
$(O)/x86-split-lock/split-lock: x86-split-lock/split_lock.c common/trapline.h
	$(tl_static)
