# loop-order: fill a 2-D array in row order and in column order. Both fills
# are built without vectorisation so the orders differ only in addresses.
BINS += $(O)/loop-order/loop-order
$(O)/loop-order/loop-order: CFLAGS += -fno-tree-vectorize
$(O)/loop-order/loop-order: loop-order/loop_order.c common/trapline.h
	$(tl_static)
