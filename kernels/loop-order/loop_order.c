/*
 * loop-order - fill a 2-D array in row order and in column order.
 *
 * From the method in shared/claims.md E9 (Gove, "Code complete: burn this
 * chapter"): the same array, the same stores, two loop orders. Row order
 * writes consecutive addresses (one new cache line every line/elem stores,
 * one new page every page/elem stores); column order strides by a whole row
 * per store, so every store touches a different cache line and, once a row
 * is a page or more, a different page (a TLB miss when the column has more
 * pages than the TLB has entries). The claim has no figures; the kernel
 * reports the time ratio and prints the analytic lines/pages per store.
 *
 * Variants (variant=): row, column. Keys: rows, cols (int elements; default
 * 4096 x 4096 = 64 MiB, rows of 16 KiB so a column walk touches a new 4 KiB
 * page every store; quick: 2048 x 1024 = 8 MiB, rows of 4 KiB, still a new
 * page per column store and far bigger than L2).
 * ops = elements written.
 *
 * Both fills are compiled without vectorisation (kernel.mk), so the two
 * orders execute the same scalar store per element and differ only in the
 * addresses; disasm.yaml checks that no vector store crept in. The array is
 * touched once before timing (warm-up, and a memset) so no run pays the page
 * faults.
 */
#include "trapline.h"
#include <unistd.h>

TL_ARGS({"variant", "row", "[choice] row|column"},
        {"rows", "4096", "[int 1..1048576] rows of the array (quick: 2048)"},
        {"cols", "4096", "[int 1..1048576] int elements per row (quick: 1024)"});

struct ctx {
    int *a;
    long rows, cols;
    int column;
};

/* a[i][j] = i + j, row after row. */
__attribute__((noinline)) static uint64_t fill_row(int *a, long rows, long cols)
{
    for (long i = 0; i < rows; i++)
        for (long j = 0; j < cols; j++)
            a[i * cols + j] = (int)(i + j);
    return (uint64_t)rows * cols;
}

/* The same stores, column after column. */
__attribute__((noinline)) static uint64_t fill_column(int *a, long rows, long cols)
{
    for (long j = 0; j < cols; j++)
        for (long i = 0; i < rows; i++)
            a[i * cols + j] = (int)(i + j);
    return (uint64_t)rows * cols;
}

static uint64_t body(void *vc)
{
    struct ctx *c = vc;
    int *a = c->a;
    TL_HIDE(a);
    uint64_t n = c->column ? fill_column(a, c->rows, c->cols) : fill_row(a, c->rows, c->cols);
    tl_compiler_barrier();
    return n;
}

int main(int argc, char **argv)
{
    /* The preamble stays written out (not tl_start): see trapline.h, the model lanes. */
    tl_exp = "loop-order";
    tl_parse_args(argc, argv, args);
    const char *variant = tl_choice(args, "variant", "row|column");
    int quick = tl_int(args, "quick");
    int reps = tl_int(args, "reps"), warmup = tl_int(args, "warmup");
    long rows = tl_int(args, "rows"), cols = tl_int(args, "cols");
    if (quick && !tl_given(args, "rows"))
        rows = 2048;
    if (quick && !tl_given(args, "cols"))
        cols = 1024;
    if (rows < 1 || cols < 1 || (double)rows * cols * sizeof(int) > 8e9) {
        fprintf(stderr, "%s: need rows, cols >= 1 and an array of at most 8 GB\n", tl_exp);
        return 2;
    }
    size_t bytes = (size_t)rows * cols * sizeof(int);
    if (sizeof(void *) == 4 && (double)rows * cols * sizeof(int) > 1.5e9) {
        tl_skip(variant, "address_space_32bit");
        return 0;
    }
    tl_timer_check();

    long page = sysconf(_SC_PAGESIZE);
    long line = 64;
#ifdef _SC_LEVEL1_DCACHE_LINESIZE
    if (sysconf(_SC_LEVEL1_DCACHE_LINESIZE) > 0)
        line = sysconf(_SC_LEVEL1_DCACHE_LINESIZE);
#endif
    long l2 = -1;
#ifdef _SC_LEVEL2_CACHE_SIZE
    l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    long row_bytes = cols * (long)sizeof(int);
    int column = !strcmp(variant, "column");
    /* Analytic: new lines / new pages per store. Row order: one in
     * line/elem (page/elem) stores. Column order: the address moves by a
     * row, so each store is in a new line if a row is at least a line, and
     * in a new page if a row is at least a page. */
    double lines_per, pages_per;
    if (!column) {
        lines_per = (double)sizeof(int) / line;
        pages_per = (double)sizeof(int) / page;
    } else {
        lines_per = row_bytes >= line ? 1.0 : (double)row_bytes / line;
        pages_per = row_bytes >= page ? 1.0 : (double)row_bytes / page;
    }
    /* Pages one column walk spans: the TLB entries it needs before it
     * can come back to the first row for the next column. */
    long col_pages = row_bytes >= page ? rows : (long)(((double)rows * row_bytes + page - 1) / page);
    printf("TL exp=%s kind=info arch=%s variant=%s elem_bytes=%zu rows=%ld cols=%ld row_bytes=%ld "
           "array_bytes=%zu line=%ld page=%ld l2_bytes=%ld lines_per_access=%.6g pages_per_access=%.6g "
           "pages_per_column=%ld\n",
           tl_exp, TL_ARCH, variant, sizeof(int), rows, cols, row_bytes, bytes, line, page, l2, lines_per,
           pages_per, col_pages);

    struct ctx c = {.rows = rows, .cols = cols, .column = column};
    c.a = tl_aligned_alloc(page, bytes); /* zeroed: every page touched */
    char params[96];
    snprintf(params, sizeof params, "rows=%ld cols=%ld", rows, cols);
    tl_measure(variant, params, warmup, reps, body, &c);

    /* The fill is order-independent: check a few elements. */
    int ok = c.a[0] == 0 && c.a[(size_t)rows * cols - 1] == (int)(rows - 1 + cols - 1) &&
             c.a[(size_t)(rows / 2) * cols + cols / 3] == (int)(rows / 2 + cols / 3);
    tl_check(variant, params, "%s", ok ? "ok" : "mismatch");
    return ok ? 0 : 1;
}
