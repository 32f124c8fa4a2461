"""The default image builder: images/build.sh, from Debian's linux-source-6.1 and
Debian's cross compilers, with the experiment kernels trapline/build.py built
(docs/images.md)."""

from __future__ import annotations

from trapline import build, images
from trapline.imagebuilders import Ahead, ImageBuilder


class Debian(ImageBuilder):
    name = "debian"
    summary = "images/build.sh: Debian's linux-source-6.1 and cross compilers, works offline"

    def image(self, ctx, arch: str) -> images.Image:
        bindir = build.guest_bins(ctx.kernels(arch))  # without the host-only kernels (kernels/Makefile)
        ctx.log(f"guest image for {arch} (kernel and initramfs, cached by content hash)")
        return images.build_image(arch, bindir, log=ctx.log)

    def to_build(self, arches: list[str]) -> list[str]:
        return [a for a in arches if not images.linux_built(a)]

    def ahead(self, ctx, arches: list[str], on_built=None) -> Ahead | None:
        """The guest Linux of each arch not in the cache yet: images/build.sh ARCH without
        the run's kernels (the kernel's cache key does not depend on them; the initramfs
        that does is built when the lane asks, in seconds). build.sh lets one kernel
        compile at a time, at nice 19, so a lane that builds its own image meanwhile waits."""
        todo = self.to_build(arches)
        if not todo:
            return None
        ctx.log(f"building the guest Linux for {', '.join(todo)} in the background (once, cached by content hash)")
        return Ahead(todo, lambda arch, stop: images.build_image(arch, None, None, stop=stop), on_built)
