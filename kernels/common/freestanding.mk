# The sparc64 kernels of the gem5-freestanding flavour, linked without glibc;
# included by kernels/Makefile.
#
# The gem5 flavours are the builds with -DTL_GEM5 in their flags
# (trapline/build.py FLAVOURS passes them in ARCHFLAGS): the region markers
# TL_ROI_BEGIN/END become gem5's m5 ops (common/trapline.h). The
# gem5-freestanding flavour adds -DTL_FREESTANDING, and on sparc64 it links
# the binaries a kernel.mk names in TL_FREESTANDING_BINS with -nostdlib,
# common/tl_freestanding.c and libgcc instead of glibc: a stock gem5's SPARC
# SE mode stops a static glibc program at its first system call (why, and what
# the runtime provides: tl_freestanding.c; docs/gem5.md, "SPARC in SE mode").
# trapline's gem5 runs glibc programs (its change sparc-glibc,
# gem5_configs/changes/sparc-glibc), so its lanes run the gem5 flavour, linked
# with glibc as every other build is. The kernel's own sources compile exactly
# as in the flavour's other binaries; only the link differs. By hand:
#
#   make -C kernels ARCH=sparc64 CC=sparc64-linux-gnu-gcc OBJDUMP=sparc64-linux-gnu-objdump \
#        ARCHFLAGS="-mcpu=ultrasparc -DTL_GEM5 -DTL_FREESTANDING" O=/tmp/gem5-sparc64
#
# TL_FREESTANDING=1 gives the freestanding link without -DTL_GEM5 (the default
# markers, which run anywhere, qemu-sparc64 user mode included: the tests use
# it); TL_FREESTANDING=0 turns it off.
#
# Without -DTL_FREESTANDING (and TL_FREESTANDING) nothing here changes the
# build. tl_freestanding.c is not a make prerequisite of the binaries (no
# kernel lists it: each link reads its prerequisites' .c files);
# trapline/build.py keys its build cache on every file under kernels/, so a
# change to it rebuilds there.
TL_FREESTANDING ?= $(if $(filter -DTL_FREESTANDING,$(CFLAGS)),1,0)

ifeq ($(ARCH)-$(TL_FREESTANDING),sparc64-1)
TL_FREESTANDING_BINS :=
TL_LINK_GLIBC = $(CC) $(CFLAGS) $(STATIC) -o $@ $(filter %.c,$^) $(LDFLAGS) $(LDLIBS_$(notdir $@))
TL_LINK_FREESTANDING = $(CC) $(CFLAGS) $(STATIC) -nostdlib -o $@ $(filter %.c,$^) common/tl_freestanding.c \
    $(LDFLAGS) $(LDLIBS_$(notdir $@)) -lgcc
define tl_static
	@mkdir -p $(@D)
	$(if $(filter $@,$(TL_FREESTANDING_BINS)),$(TL_LINK_FREESTANDING),$(TL_LINK_GLIBC))
endef
endif
