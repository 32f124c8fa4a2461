# strlen-loop: strlen in the loop condition vs hoisted. strlen-count is the
# same code linked with --wrap=strlen to count the calls the loop makes.
BINS += $(O)/strlen-loop/strlen-loop $(O)/strlen-loop/strlen-count
$(O)/strlen-loop/strlen-loop: strlen-loop/strlen_loop.c common/trapline.h
	$(tl_static)
$(O)/strlen-loop/strlen-count: CFLAGS += -DSTRLEN_COUNT -fno-builtin-strlen
LDLIBS_strlen-count := -Wl,--wrap=strlen
$(O)/strlen-loop/strlen-count: strlen-loop/strlen_loop.c common/trapline.h
	$(tl_static)
