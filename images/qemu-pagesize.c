/*
 * qemu-pagesize.c - an LD_PRELOAD library that makes QEMU see host pages of
 * TL_HOST_PAGE bytes (a power of two no smaller than the real page size):
 * getpagesize() and sysconf(_SC_PAGESIZE) return it, nothing else changes.
 *
 * Why: QEMU 7.2 cannot save a machine whose target pages are larger than the
 * host's. Its RAM migration (migration/ram.c, pss_host_page_prepare) divides by
 * the number of target pages per host page, which is 0 for sun4u's 8 KiB pages
 * on a 4 KiB host, and QEMU dies of SIGFPE at the first page it saves
 * (gitlab.com/qemu-project/qemu/-/issues/1456; fixed after 7.2 by "migration:
 * Fix crash on guest psize > host psize", which then sends one target page per
 * step; Debian 12's 7.2.22 still crashes). With host pages reported as 8 KiB the
 * quotient is 1 and QEMU sends one target page per step, as the fix does. Every
 * size and alignment QEMU derives from the page size is then a multiple of the
 * real one, which the kernel accepts; QEMU's TCG already works in 8 KiB target
 * pages on sun4u. images/boot.sh preloads it for a saving or restoring run of an
 * arch whose table entry names a snapshot host page (trapline/arch.py,
 * snapshot_host_page), and builds it (cached by the sha256 of this file);
 * tests/test_62_snapshot.py checks that QEMU still needs it and that a guest
 * restored with it runs its commands as a booted one does.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

static long page(void)
{
    static long p;
    if (!p) {
        const char *s = getenv("TL_HOST_PAGE");
        long v = s ? strtol(s, NULL, 10) : 0;
        p = 4096;
        /* only a power of two at least the real size (the kernel's own) */
        if (v >= 4096 && !(v & (v - 1)))
            p = v;
    }
    return p;
}

int getpagesize(void)
{
    return (int)page();
}

long sysconf(int name)
{
    static long (*real)(int);
    if (name == _SC_PAGESIZE)
        return page();
    if (!real)
        real = (long (*)(int))dlsym(RTLD_NEXT, "sysconf");
    return real(name);
}
