#!/usr/bin/env bash
# Make the Debian 12 (bookworm) base image the Dockerfile builds FROM, from Debian
# packages alone, for machines that cannot pull from a registry:
#
#   .ci/docker-base.sh [TAG]          TAG defaults to trapline-base:bookworm
#   docker build --network host --build-arg BASE=trapline-base:bookworm -t trapline .
#
# mmdebstrap (installed with apt when missing; debootstrap is the fallback) builds a
# minbase bookworm root file system from the Debian mirror this machine's apt already
# uses (read from the apt configuration, never written here), and `docker import`
# turns it into an image. The image's /etc/apt/sources.list points at the same mirror
# (bookworm, bookworm-updates and, when configured here, bookworm-security; main only:
# everything trapline needs is in main), so the Dockerfile's apt-get calls use it too.
# Set TRAPLINE_DEBIAN_MIRROR (and TRAPLINE_DEBIAN_SECURITY) to choose other mirrors.
#
# Nothing happens when TAG already exists (delete it with `docker rmi TAG` to rebuild).
# Root file system timestamps come from SOURCE_DATE_EPOCH (default: the date of the
# mirror's bookworm Release file as apt saw it, else now).
set -euo pipefail

TAG=${1:-trapline-base:bookworm}
SUITE=bookworm
say() { printf 'docker-base.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

command -v docker >/dev/null || die "docker is not installed"
docker info >/dev/null 2>&1 || die "the Docker engine does not answer (docker info failed)"
if docker image inspect "$TAG" >/dev/null 2>&1; then
    say "$TAG exists ($(docker image inspect -f '{{.Id}}' "$TAG" | cut -c1-19)); nothing to do"
    exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || die "building a root file system needs root (or sudo)"
    sudo=(sudo)
fi

# The mirror: what apt on this machine fetches bookworm from (deb822 .sources and
# one-line .list files alike, as apt itself parses them).
main=${TRAPLINE_DEBIAN_MIRROR:-}
security=${TRAPLINE_DEBIAN_SECURITY:-}
if [ -z "$main" ]; then
    while read -r uri rel; do
        case $rel in
        "$SUITE") main=${main:-$uri} ;;
        "$SUITE-security") security=${security:-$uri} ;;
        esac
    done < <(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 'Identifier: Packages' 2>/dev/null | sort -u)
fi
[ -n "$main" ] || die "no '$SUITE' mirror in this machine's apt configuration; set TRAPLINE_DEBIAN_MIRROR"
main=${main%/} security=${security%/}
sources=("deb $main $SUITE main" "deb $main $SUITE-updates main")
[ -z "$security" ] || sources+=("deb $security $SUITE-security main")
say "mirror: $main${security:+ (security: $security)}"

if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
    rel=$(ls /var/lib/apt/lists/*_dists_${SUITE}_Release /var/lib/apt/lists/*_dists_${SUITE}_InRelease 2>/dev/null | head -n1 || true)
    d=$([ -n "$rel" ] && sed -n 's/^Date: //p' "$rel" | head -n1 || true)
    SOURCE_DATE_EPOCH=$(date -u -d "${d:-now}" +%s)
fi
export SOURCE_DATE_EPOCH

tool=
for t in mmdebstrap debootstrap; do
    if command -v "$t" >/dev/null; then tool=$t; break; fi
done
if [ -z "$tool" ]; then
    say "installing mmdebstrap (apt-get install mmdebstrap)"
    "${sudo[@]}" apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends mmdebstrap >&2
    tool=mmdebstrap
fi

work=$(mktemp -d)
trap '"${sudo[@]}" rm -rf "$work"' EXIT
tar="$work/rootfs.tar"
t0=$(date +%s)
say "building a $SUITE minbase root file system with $tool"
if [ "$tool" = mmdebstrap ]; then
    # Like the official image: no translations, no apt caches or lists left behind
    # (mmdebstrap removes them by default).
    nice -n 10 "${sudo[@]}" env SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" mmdebstrap --quiet \
        --variant=minbase --format=tar \
        --aptopt='Acquire::Languages "none"' \
        "$SUITE" "$tar" "${sources[@]}" >&2
else
    root="$work/root"
    nice -n 10 "${sudo[@]}" debootstrap --variant=minbase "$SUITE" "$root" "$main" >&2
    printf '%s\n' "${sources[@]}" | "${sudo[@]}" tee "$root/etc/apt/sources.list" >/dev/null
    "${sudo[@]}" rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
    "${sudo[@]}" tar --numeric-owner --xattrs -C "$root" -cf "$tar" .
fi
say "root file system: $(du -h "$tar" | cut -f1) in $(($(date +%s) - t0)) s; importing as $TAG"
"${sudo[@]}" cat "$tar" | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    --message "trapline: Debian $SUITE minbase from $tool" \
    - "$TAG" >/dev/null
say "$TAG: $(docker image inspect -f '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1 / 1e6}')"
