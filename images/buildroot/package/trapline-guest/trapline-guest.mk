################################################################################
#
# trapline-guest
#
################################################################################

# trapline's own sources: the repository this BR2_EXTERNAL tree is part of
# (images/buildroot/../..). Only what the build reads is copied into the build
# directory: the guest's /init and tests, the initramfs half of images/build.sh
# (its guest_programs and default_run_list, so both builders compile and list the
# same), the experiment kernels and the architecture table.
TRAPLINE_GUEST_VERSION = local
TRAPLINE_GUEST_SITE = $(realpath $(BR2_EXTERNAL_TRAPLINE_PATH)/../..)
TRAPLINE_GUEST_SITE_METHOD = local
TRAPLINE_GUEST_LICENSE = MIT
TRAPLINE_GUEST_LICENSE_FILES = LICENSE
TRAPLINE_GUEST_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS = \
	--exclude=__pycache__ --exclude=/kernels/build/ \
	--include=/LICENSE \
	--include=/images/ --include=/images/init/*** --include=/images/tests/*** \
	--include=/images/lib/ --include=/images/lib/initramfs.sh \
	--include=/kernels/*** \
	--include=/trapline/ --include=/trapline/__init__.py --include=/trapline/arch.py \
	--include=/trapline/errors.py \
	--exclude=*
TRAPLINE_GUEST_INSTALL_IMAGES = YES

# trapline's name for the architecture (trapline/arch.py): its code generation
# flags (TL_CFLAGS) come from that table, as images/build.sh and trapline/build.py
# take them, so the kernels and /init get the same flags from either builder;
# Buildroot's toolchain wrapper adds no -march/-mcpu of its own when one is given.
TRAPLINE_GUEST_ARCH = $(call qstrip,$(BR2_PACKAGE_TRAPLINE_GUEST_ARCH))
TRAPLINE_GUEST_TABLE = table=$$(cd $(@D) && python3 -m trapline.arch build $(TRAPLINE_GUEST_ARCH)) && eval "$$table"
# images/lib/initramfs.sh's functions, with Buildroot's compiler
TRAPLINE_GUEST_LIB = $(TRAPLINE_GUEST_TABLE) && ARCH=$(TRAPLINE_GUEST_ARCH) HERE=$(@D)/images \
	INIT_SRC=$(@D)/images/init/init.c CC="$(TARGET_CC)" UFLAGS="$$TL_CFLAGS" && \
	. $(@D)/images/lib/initramfs.sh

# out/root: what goes to the target's / (/init, /trapline/tests, /trapline/run.list);
# out/bin: the experiment kernels (kernels/Makefile, O= made absolute: make -C moves),
# the target's /trapline/bin.
define TRAPLINE_GUEST_BUILD_CMDS
	rm -rf $(@D)/out
	$(TRAPLINE_GUEST_TABLE) && $(TARGET_MAKE_ENV) $(MAKE) -C $(@D)/kernels ARCH=$(TRAPLINE_GUEST_ARCH) \
		CC="$(TARGET_CC)" OBJDUMP="$(TARGET_OBJDUMP)" ARCHFLAGS="$$TL_CFLAGS" O=$$(realpath $(@D))/out/bin all
	bash -c 'set -e; $(TRAPLINE_GUEST_LIB) && guest_programs $(@D)/out/root && \
		default_run_list >$(@D)/out/root/trapline/run.list'
endef

define TRAPLINE_GUEST_INSTALL_TARGET_CMDS
	rm -rf $(TARGET_DIR)/trapline
	mkdir -p $(TARGET_DIR)/trapline/bin
	cp -a $(@D)/out/root/. $(TARGET_DIR)/
	cp -a $(@D)/out/bin/. $(TARGET_DIR)/trapline/bin/
endef

# for the post-image script and the harness: the kernels as the guest holds them
# (their sha256 go into a run's manifest) and where init's snapshot spin is
define TRAPLINE_GUEST_INSTALL_IMAGES_CMDS
	rm -rf $(BINARIES_DIR)/trapline-bin
	cp -a $(@D)/out/bin $(BINARIES_DIR)/trapline-bin
	bash -c 'set -e; $(TRAPLINE_GUEST_LIB) && { \
		echo "arch=$(TRAPLINE_GUEST_ARCH)"; \
		echo "init_sha256=$$(sha256sum <$(@D)/out/root/init | cut -d" " -f1)"; \
		spin=$$(init_snapshot_spin "$(TARGET_NM)" $(@D)/out/root/init); \
		[[ -z $$spin ]] || echo "init_snapshot_spin=$$spin"; \
	} >$(BINARIES_DIR)/trapline-guest.txt'
endef

$(eval $(generic-package))
