################################################################################
#
# trapline's BR2_EXTERNAL tree (images/buildroot, docs/images.md)
#
################################################################################

include $(sort $(wildcard $(BR2_EXTERNAL_TRAPLINE_PATH)/package/*/*.mk))

# images/build.sh starts every guest kernel from the kernel's own `make tinyconfig`
# and merges images/<arch>/config.fragment onto it (BR2_LINUX_KERNEL_CONFIG_FRAGMENT_FILES
# names the same file). Buildroot's BR2_LINUX_KERNEL_DEFCONFIG can only name a
# <name>_defconfig, and the kernel has no tiny_defconfig: our defconfigs say "tiny",
# which becomes the tinyconfig target here (this file is read after linux/linux.mk,
# and the kconfig rules read the variable only when they run).
ifeq ($(LINUX_KCONFIG_DEFCONFIG),tiny_defconfig)
LINUX_KCONFIG_DEFCONFIG = tinyconfig
endif
