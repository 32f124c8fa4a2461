# trapline in a container. Everything slow happens at build time (the Debian
# packages, the pinned Python environment, the benchmark kernels for x86_64, sparc64
# and armv6, the three guest images, the timing-model plugin), so `docker run`
# starts measuring at once, with no network, as any uid. docs/docker.md has the details; in short:
#
#   docker build --network host -t trapline .
#   mkdir -p results
#   docker run --rm --network none --user "$(id -u):$(id -g)" \
#       -v "$PWD/results:/results" trapline reproduce-all --quick
#
# Base: the official Debian 12 image, pinned by its dated tag and digest:
#   debian:bookworm-20251229 (Debian 12.12), linux/amd64 image manifest
#   sha256:4216e8fe27fdd803d2822d08ed9de39825a41a47e34c32b71a23ac074f91eaf4
#   (as listed on the debuerreotype checksums page for that release).
# Without a registry, .ci/docker-base.sh makes the same Debian release from Debian
# packages (mmdebstrap --variant=minbase, docker import) and the build takes it with
#   --build-arg BASE=trapline-base:bookworm
# Either way apt installs from the base image's own apt sources, and the versions are
# whatever that mirror serves for bookworm, as on a native Debian 12 machine.
#
# gem5: by default the image has trapline's gem5, built from gem5's pinned release source
# with gem5_configs/changes/ in a stage of its own (below; about 50 minutes on 2 cores the
# first time, more beside the main stage). --build-arg GEM5=PATH takes a gem5 binary in the
# build context instead (e.g. gem5-bin/gem5.opt) and GEM5=none leaves gem5 out.
ARG BASE=debian:bookworm-20251229@sha256:4216e8fe27fdd803d2822d08ed9de39825a41a47e34c32b71a23ac074f91eaf4
ARG GEM5=

# ---- trapline's gem5 (`./run.sh gem5 build`, trapline/platforms/gem5/from_source.py).
# First what the build reads and nothing else: the builder and the modules it imports,
# the changes without their READMEs, and the release source (gem5-src/ in the build
# context, git-ignored: docs/docker.md; without it the builder clones gem5's repository
# at the release tag). run.sh comes along only so that the COPY never copies nothing,
# and goes again. COPY --from's cache key is the content it copies, so an edit to a
# README or to run.sh leaves the build's layer below cached; an edit to a patch, an
# extras file or the builder rebuilds gem5 (a plain RUN, no BuildKit cache mount: the
# legacy builder has none; the build tree is removed at the end of the step).
FROM ${BASE} AS gem5-inputs
COPY trapline/__init__.py trapline/errors.py trapline/paths.py trapline/proc.py trapline/results.py /in/trapline/
COPY trapline/platforms/gem5/from_source.py /in/trapline/platforms/gem5/
COPY gem5_configs/changes/ /in/gem5_configs/changes/
COPY run.sh gem5-src* /in/gem5-src/
RUN find /in/gem5_configs/changes -name README.md -delete && rm /in/gem5-src/run.sh

# The build itself. With GEM5 set (a path, or none) it builds nothing.
FROM ${BASE} AS gem5
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG GEM5
WORKDIR /opt/trapline
COPY --from=gem5-inputs /in/ ./
RUN mkdir -p /opt/gem5 \
    && if [ -z "$GEM5" ]; then \
         apt-get update -qq \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
              python3 git ca-certificates xz-utils binutils >/dev/null \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
              $(PYTHONPATH=. python3 trapline/platforms/gem5/from_source.py packages) >/dev/null \
         && src=$(ls gem5-src/*.tar.* 2>/dev/null | head -n 1) \
         && TRAPLINE_CACHE=/opt/gem5-work PYTHONPATH=. \
              python3 trapline/platforms/gem5/from_source.py build ${src:+--source "$src"} \
         && cp -a /opt/gem5-work/gem5/trapline-* /opt/gem5/ \
         && rm -rf /opt/gem5-work; \
       fi

FROM ${BASE}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# TRAPLINE_CACHE: venv, kernels, guest images, plugin, built below; read-only at run
# time. TRAPLINE_RESULTS: mount a directory here. MPLCONFIGDIR: matplotlib's cache
# must be writable by whatever uid runs the container.
ENV LANG=C.UTF-8 \
    TRAPLINE_CACHE=/opt/trapline/cache \
    TRAPLINE_RESULTS=/results \
    MPLCONFIGDIR=/tmp/matplotlib
WORKDIR /opt/trapline

# 1. The Debian packages and the Python environment, installed by run.sh itself
#    (its APT_PACKAGES list and requirements.txt are the one definition of both):
#    `run.sh test --version` installs what is missing (apt-get, without recommends),
#    creates the venv in the cache (pip fetches the pinned packages and builds
#    pycachesim), then only runs `pytest --version`.
#    pip honours the PIP_INDEX_URL / PIP_FIND_LINKS / PIP_NO_INDEX build arguments:
#    a local index or wheelhouse instead of PyPI (docs/docker.md).
ARG PIP_INDEX_URL
ARG PIP_FIND_LINKS
ARG PIP_NO_INDEX
COPY run.sh requirements.txt ./
RUN ./run.sh test --version \
    && apt-get clean && rm -rf /var/lib/apt/lists/* /root/.cache/pip

# 2. The QEMU plugin header for the timing model, from Debian's qemu source package
#    of the installed version (the script adds a deb-src entry for the same mirror;
#    it is removed again, with the indexes, once the header is in the cache).
COPY model/fetch-qemu-headers.sh model/
RUN sh model/fetch-qemu-headers.sh >/dev/null \
    && rm -f /etc/apt/sources.list.d/trapline-deb-src.* \
    && apt-get clean && rm -rf /var/lib/apt/lists/*

# 3. The three guest Linux kernels (2 to 5 minutes each on 2 cores). They depend on
#    images/ and the arch table only, so this layer survives edits to the harness and the benchmark
#    kernels; step 4 finds them in the cache by the same content hash. The scripts
#    ask the architecture table (trapline/arch.py, standard library only) for their
#    per-arch values.
#    Kernels built elsewhere from the same inputs can be handed over in linux-cache/ (in
#    the build context, git-ignored: the tests put there the ones the suite built
#    natively, tests/test_70_docker.py); build.sh takes one only when its content hash
#    (sources, fragment, scripts, compiler and package versions) is this build's own.
COPY images/ images/
COPY trapline/__init__.py trapline/errors.py trapline/arch.py trapline/
COPY run.sh linux-cache* /tmp/linux-cache/
RUN mkdir -p "$TRAPLINE_CACHE/images" \
    && for d in /tmp/linux-cache/*-linux-*/; do \
         if [ -f "$d/manifest.txt" ]; then cp -a "$d" "$TRAPLINE_CACHE/images/"; fi; \
       done \
    && rm -rf /tmp/linux-cache \
    && for arch in sparc64 armv6 x86_64; do images/build.sh "$arch" >/dev/null || exit 1; done \
    && rm -rf "$TRAPLINE_CACHE"/images/*-initramfs-*

# 4. The clone, then the native commands: the benchmark kernels for every arch, the
#    guest images holding them, the timing-model plugin. The cache is made readable
#    by any uid before the images (they are keyed by the kernels' file modes).
COPY . .
RUN ./run.sh build >/dev/null \
    && chmod -R a+rX /opt/trapline \
    && ./run.sh images \
    && sh model/build.sh >/dev/null \
    && chmod -R a+rX /opt/trapline \
    && python3 -m compileall -q trapline \
    && git config --system --add safe.directory /opt/trapline

# 5. A non-root user (uid 1000) for runs without --user, and a /results any uid can
#    write when nothing is mounted there. Then the check that a run needs nothing
#    more: as this user the cache is read-only, so any attempt to install a package,
#    create the venv, or build a kernel, an image or the plugin fails the build here.
#    gem5 (docs/docker.md): by default trapline's gem5 from the stage above, copied into
#    the cache where trapline finds its own build (docs/gem5.md, 'Get gem5'). GEM5=PATH:
#    a gem5 binary of yours in the build context, e.g. gem5-bin/gem5.opt (the clone's
#    gem5-bin/ is git-ignored); it came in with the clone in step 4 (one copy) and goes
#    on PATH as gem5.opt. Either way its facts (sha256, the ISAs and changes it has) are
#    cached, and the kernels built in the flavour it runs (build --for-gem5), while the
#    cache is still writable. gem5's runtime libraries are in run.sh's
#    APT_PACKAGES (step 1). GEM5=none: no gem5, and the gem5 lanes are not-applicable,
#    saying how to get gem5.
ARG GEM5
COPY --from=gem5 /opt/gem5/ ${TRAPLINE_CACHE}/gem5/
RUN useradd --uid 1000 --user-group --create-home --shell /bin/bash trapline \
    && install -d -m 1777 /results \
    && if [ -z "$GEM5" ]; then \
         ./run.sh gem5 which >/dev/null \
         && ./run.sh build --for-gem5 >/dev/null && chmod -R a+rX "$TRAPLINE_CACHE"; \
       elif [ "$GEM5" != none ]; then \
         { [ -f "$GEM5" ] && [ -x "$GEM5" ]; } \
           || { echo "GEM5: '$GEM5' is not an executable file in the build context (docs/docker.md)" >&2; exit 2; }; \
         ln -s "$(realpath "$GEM5")" /usr/local/bin/gem5.opt \
         && GEM5= ./run.sh gem5 which \
         && GEM5= ./run.sh build --for-gem5 >/dev/null \
         && chmod -R a+rX "$TRAPLINE_CACHE"; \
       fi
USER trapline
RUN ./run.sh list >/dev/null && ./run.sh build >/dev/null && ./run.sh images >/dev/null \
    && sh model/build.sh >/dev/null \
    && if [ "$GEM5" != none ]; then GEM5= ./run.sh gem5 which >/dev/null; fi

ENTRYPOINT ["/opt/trapline/run.sh"]
CMD ["reproduce-all"]
