# plt-itlb: a chain of 26 calls a -> ... -> z in four builds: all in the
# executable, one shared library (calls through the PLT), one library with
# static routines (no PLT), and one library per routine. The dynamic builds
# find their libraries next to them (rpath $ORIGIN, see tl_dynamic).
PLT_DIR := $(O)/plt-itlb
PLT_LETTERS := a b c d e f g h i j k l m n o p q r s t u v w x y z
PLT_PERLIB_SOS := $(foreach l,$(PLT_LETTERS),$(PLT_DIR)/libplt_$(l).so)

BINS += $(PLT_DIR)/plt-exe $(PLT_DIR)/plt-onelib $(PLT_DIR)/plt-internal $(PLT_DIR)/plt-perlib

# All routines linked into the static executable.
$(PLT_DIR)/plt-exe: CFLAGS += -DPLT_EXE
$(PLT_DIR)/plt-exe: plt-itlb/plt_main.c plt-itlb/chain.c common/trapline.h
	$(tl_static)

# One library, default visibility, -fPIC, no -Bsymbolic: calls through the PLT.
$(PLT_DIR)/libplt-chain.so: plt-itlb/chain.c
	$(tl_shlib)
CFLAGS_plt-onelib := -DPLT_ONELIB
$(PLT_DIR)/plt-onelib: plt-itlb/plt_main.c $(PLT_DIR)/libplt-chain.so common/trapline.h
	$(tl_dynamic)

# One library, b..z static: direct calls.
CFLAGS_libplt-internal.so := -DCHAIN_INTERNAL
$(PLT_DIR)/libplt-internal.so: plt-itlb/chain.c
	$(tl_shlib)
CFLAGS_plt-internal := -DPLT_INTERNAL
$(PLT_DIR)/plt-internal: plt-itlb/plt_main.c $(PLT_DIR)/libplt-internal.so common/trapline.h
	$(tl_dynamic)

# One library per routine: libplt_x.so holds routine x only.
$(foreach l,$(PLT_LETTERS),$(eval CFLAGS_libplt_$(l).so := -DCHAIN_ONLY=R_$(l) -DCHAIN_SELF=$(l)))
$(PLT_PERLIB_SOS): $(PLT_DIR)/libplt_%.so: plt-itlb/chain.c
	$(tl_shlib)
CFLAGS_plt-perlib := -DPLT_PERLIB
$(PLT_DIR)/plt-perlib: plt-itlb/plt_main.c $(PLT_PERLIB_SOS) common/trapline.h
	$(tl_dynamic)
