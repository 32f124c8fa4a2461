"""The default image builder: images/build.sh, from Debian's linux-source-6.1 and
Debian's cross compilers, with the experiment kernels trapline/build.py built
(docs/images.md)."""

from __future__ import annotations

from trapline import images
from trapline.imagebuilders import ImageBuilder


class Debian(ImageBuilder):
    name = "debian"
    summary = "images/build.sh: Debian's linux-source-6.1 and cross compilers, works offline"

    def image(self, ctx, arch: str) -> images.Image:
        bindir = ctx.kernels(arch)
        ctx.log(f"guest image for {arch} (kernel and initramfs, cached by content hash)")
        return images.build_image(arch, bindir, log=ctx.log)
