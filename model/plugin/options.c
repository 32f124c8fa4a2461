/*
 * options.c - the timing plugin's options: everything about them that
 * options.def does not say itself.
 *
 * From the table (an X-macro list, one OPT line per option) come the options
 * struct (model.h), the defaults, the parser and its range checks, the echo
 * under "options" in the stats JSON and help=json, which prints the table for
 * trapline/plugin.py and the docs. Options are key=value (QEMU contrib/plugins
 * style); an unknown key fails at once with the list of valid ones. The checks
 * across options (cache and TLB geometry, latencies that grow towards memory,
 * NUMA shapes, per-architecture rules) are in options_validate().
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

Config cfg;
bool opt_given[OPT_COUNT];
const char *const arch_names[] = {"x86_64", "sparc64", "armv6"};
uint64_t numa_lat_m[MAX_NODES][MAX_NODES];
int unaligned_pol[9];
uint64_t straddle_pen_int, unaligned_pen_int;

static uint64_t whole_cycles(double pen)
{
    return pen == (double)(uint64_t)pen ? (uint64_t)pen : UINT64_MAX;
}

enum kind { K_U64, K_F64, K_F64P, K_ENUM, K_STR, K_LIST, K_MATRIX };
static const char *const kind_names[] = {"U64", "F64", "F64P", "ENUM", "STR", "LIST", "MATRIX"};

/* One row of options.def, with where its value lives in cfg. */
typedef struct {
    const char *name;
    enum kind kind;
    const char *def;
    uint64_t min, max;
    const char *unit, *field, *conv, *doc;
    size_t off;   /* of the value in Config */
    size_t n_off; /* LIST, MATRIX: of the count (name_n) */
} Opt;

#define N_OFF_U64(n) 0
#define N_OFF_F64(n) 0
#define N_OFF_F64P(n) 0
#define N_OFF_ENUM(n) 0
#define N_OFF_STR(n) 0
#define N_OFF_LIST(n) offsetof(Config, n##_n)
#define N_OFF_MATRIX(n) offsetof(Config, n##_n)
static const Opt opts[OPT_COUNT] = {
#define OPT(name, kind, def, min, max, unit, field, conv, doc) \
    {#name, K_##kind, def, min, max, unit, field, conv, doc, offsetof(Config, name), N_OFF_##kind(name)},
#include "options.def"
#undef OPT
};

int fail(const char *fmt, ...)
{
    char msg[4096 + 256]; /* (the valid keys: valid_keys) */
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(msg, sizeof msg, "trapline-model: ");
    vsnprintf(msg + n, sizeof msg - n - 2, fmt, ap);
    va_end(ap);
    strcat(msg, "\n");
    /* QEMU 7.2 prints qemu_plugin_outs() only under -d plugin: say it on
     * stderr too, so that a refused option is never silent */
    qemu_plugin_outs(msg);
    fputs(msg, stderr);
    return -1;
}

/* the valid keys, space-separated (for the messages) */
static const char *valid_keys(void)
{
    static char valid[4096];
    if (!*valid) {
        for (int i = 0; i < OPT_COUNT; i++)
            strcat(strcat(valid, " "), opts[i].name);
        strcat(valid, " (help=json describes each)");
    }
    return valid;
}

/* ENUM: the k-th of the values listed in unit ("wb|wt"), or NULL */
static const char *enum_value(const Opt *o, int k, char *buf, size_t size)
{
    const char *p = o->unit;
    for (int i = 0; i < k; i++) {
        p = strchr(p, '|');
        if (!p)
            return NULL;
        p++;
    }
    size_t n = strcspn(p, "|");
    if (n >= size)
        return NULL;
    memcpy(buf, p, n);
    buf[n] = 0;
    return buf;
}

/* The one-line refusal of a value: the option, what it must be, its doc. */
static int refuse(const Opt *o, const char *val)
{
    char unit[64] = "";
    if (strcmp(o->unit, "-"))
        snprintf(unit, sizeof unit, " %s", o->unit);
    switch (o->kind) {
    case K_U64:
        return fail("%s=%s is not valid: an integer from %" PRIu64 " to %" PRIu64 "%s (%s)", o->name, val, o->min,
                    o->max, unit, o->doc);
    case K_F64:
        return fail("%s=%s is not valid: a number of %s from %" PRIu64 " to %" PRIu64 ", fractions allowed (%s)",
                    o->name, val, o->unit, o->min, o->max, o->doc);
    case K_F64P:
        return fail("%s=%s is not valid: a number of %s above %" PRIu64 " and at most %" PRIu64 " (%s)", o->name, val,
                    o->unit, o->min, o->max, o->doc);
    case K_ENUM: {
        char choices[256];
        snprintf(choices, sizeof choices, "%s", o->unit);
        for (char *c = choices; *c; c++)
            if (*c == '|')
                *c = ' ';
        return fail("%s=%s is not valid; choose one of: %s (%s)", o->name, val, choices, o->doc);
    }
    case K_STR:
        return fail("%s= needs a file name (%s)", o->name, o->doc);
    case K_LIST:
    case K_MATRIX:
        break;
    }
    return fail("%s=%s is not valid: colon-separated integers, each from %" PRIu64 " to %" PRIu64 "%s (%s)", o->name,
                val, o->min, o->max, unit, o->doc);
}

static int to_u64(const char *val, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    if (!*val || *val == '-' || *val == '+')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(val, &end, 0);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_value(const Opt *o, const char *val)
{
    char *p = (char *)&cfg + o->off;
    switch (o->kind) {
    case K_U64:
        return to_u64(val, o->min, o->max, (uint64_t *)p) ? refuse(o, val) : 0;
    case K_F64:
    case K_F64P: {
        char *end;
        errno = 0;
        double d = strtod(val, &end);
        bool above_min = o->kind == K_F64P ? d > (double)o->min : d >= (double)o->min;
        if (errno || end == val || *end || !isfinite(d) || !above_min || !(d <= (double)o->max))
            return refuse(o, val);
        *(double *)p = d;
        return 0;
    }
    case K_ENUM: {
        char buf[64];
        for (int k = 0; enum_value(o, k, buf, sizeof buf); k++)
            if (!strcmp(val, buf)) {
                *(int *)p = k;
                return 0;
            }
        return refuse(o, val);
    }
    case K_STR:
        if (!*val)
            return refuse(o, val);
        free(*(char **)p);
        *(char **)p = strdup(val);
        return 0;
    case K_LIST:
    case K_MATRIX: {
        char buf[1024];
        unsigned *n = (unsigned *)((char *)&cfg + o->n_off);
        if (strlen(val) >= sizeof buf)
            return fail("%s= is too long", o->name);
        strcpy(buf, val);
        *n = 0;
        for (char *tok = strtok(buf, ":"); tok; tok = strtok(NULL, ":")) {
            if (*n == LIST_MAX)
                return fail("%s=%s has more than %d values", o->name, val, LIST_MAX);
            if (to_u64(tok, o->min, o->max, (uint64_t *)p + (*n)++))
                return refuse(o, val);
        }
        return *n ? 0 : refuse(o, val);
    }
    }
    return -1;
}

/* Every option's default: its table value, parsed as a given one would be. */
void options_defaults(void)
{
    for (int i = 0; i < OPT_COUNT; i++)
        if (*opts[i].def && parse_value(&opts[i], opts[i].def))
            abort(); /* options.def is wrong: its default is out of its own range */
}

int options_parse(const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg)
        return fail("argument '%s' is not key=value; valid keys:%s", arg, valid_keys());
    size_t n = (size_t)(eq - arg);
    for (int i = 0; i < OPT_COUNT; i++)
        if (strlen(opts[i].name) == n && !strncmp(arg, opts[i].name, n)) {
            opt_given[i] = true;
            return parse_value(&opts[i], eq + 1);
        }
    return fail("unknown option '%.*s'; valid keys:%s", (int)n, arg, valid_keys());
}

/* ------------------------------------------------------------ the checks across options */

/* A cache or TLB geometry: size (or entries) / assoc (0 = fully associative)
 * / line (1 for a TLB). Rejects what cannot be built, naming the option. */
static int check_geometry(const char *size_key, uint64_t size, const char *assoc_key, uint64_t *assoc,
                          const char *line_key, uint64_t line, bool tlb)
{
    if (!tlb) {
        if (!is_pow2(line) || line < 4 || line > 65536)
            return fail("%s=%" PRIu64 " must be a power of two between 4 and 65536 bytes", line_key, line);
        /* the size need not be a power of two (the UltraSPARC T1's L2 is 3 MB,
         * 12-way): the number of sets must, checked below */
        if (size % line)
            return fail("%s=%" PRIu64 " is not a whole number of lines (%s=%" PRIu64 ")", size_key, size, line_key,
                        line);
        if (size < line)
            return fail("%s=%" PRIu64 " is smaller than one line (%s=%" PRIu64 ")", size_key, size, line_key,
                        line);
    } else if (size == 0) {
        return fail("%s=0: a TLB needs at least one entry", size_key);
    }
    uint64_t lines = size / line;
    if (*assoc == 0)
        *assoc = lines; /* fully associative */
    if (*assoc > lines)
        return fail("%s=%" PRIu64 " is smaller than one set (%s=%" PRIu64 " x %s %" PRIu64 ")", size_key, size,
                    assoc_key, *assoc, tlb ? "entry" : line_key, tlb ? 1 : line);
    if (lines % *assoc || !is_pow2(lines / *assoc))
        return fail("%s=%" PRIu64 " / %s=%" PRIu64 "%s does not give a power-of-two number of sets", size_key, size,
                    assoc_key, *assoc, tlb ? "" : " / line");
    if (*assoc > 4096)
        return fail("%s=%" PRIu64 " is more ways than this model supports (4096)", assoc_key, *assoc);
    return 0;
}


int options_validate(void)
{
    if (check_geometry("l1i_size", cfg.l1i_size, "l1i_assoc", &cfg.l1i_assoc, "l1i_line", cfg.l1i_line, false) ||
        check_geometry("l1d_size", cfg.l1d_size, "l1d_assoc", &cfg.l1d_assoc, "l1d_line", cfg.l1d_line, false))
        return -1;
    if (cfg.l2_size) {
        if (check_geometry("l2_size", cfg.l2_size, "l2_assoc", &cfg.l2_assoc, "l2_line", cfg.l2_line, false))
            return -1;
        if (cfg.l2_line < cfg.l1d_line || cfg.l2_line < cfg.l1i_line)
            return fail("l2_line=%" PRIu64 " is smaller than an L1 line (l1i_line=%" PRIu64 ", l1d_line=%" PRIu64
                        "): line sizes may only grow towards memory", cfg.l2_line, cfg.l1i_line, cfg.l1d_line);
        if (cfg.l2_lat < cfg.l1i_lat || cfg.l2_lat < cfg.l1d_lat)
            return fail("l2_lat=%" PRIu64 " is below an L1 hit latency (l1i_lat, l1d_lat): latencies are "
                        "load-to-use cycles of a hit in that level", cfg.l2_lat);
        if (cfg.mem_lat < cfg.l2_lat)
            return fail("mem_lat=%" PRIu64 " is below l2_lat=%" PRIu64 ": latencies are load-to-use cycles",
                        cfg.mem_lat, cfg.l2_lat);
    } else if (cfg.mem_lat < cfg.l1i_lat || cfg.mem_lat < cfg.l1d_lat) {
        return fail("mem_lat=%" PRIu64 " is below an L1 hit latency (l1i_lat, l1d_lat)", cfg.mem_lat);
    }
    if (cfg.l3_size) {
        if (!cfg.l2_size)
            return fail("l3_size=%" PRIu64 " needs an L2 above it (l2_size=0)", cfg.l3_size);
        if (check_geometry("l3_size", cfg.l3_size, "l3_assoc", &cfg.l3_assoc, "l3_line", cfg.l3_line, false))
            return -1;
        if (cfg.l3_line < cfg.l2_line)
            return fail("l3_line=%" PRIu64 " is smaller than l2_line=%" PRIu64 ": line sizes may only grow towards "
                        "memory", cfg.l3_line, cfg.l2_line);
        if (cfg.l3_lat < cfg.l2_lat || cfg.mem_lat < cfg.l3_lat)
            return fail("l3_lat=%" PRIu64 " must lie between l2_lat=%" PRIu64 " and mem_lat=%" PRIu64
                        ": latencies are load-to-use cycles", cfg.l3_lat, cfg.l2_lat, cfg.mem_lat);
    }
    straddle_pen_int = whole_cycles(cfg.straddle_penalty);
    unaligned_pen_int = whole_cycles(cfg.unaligned_penalty);
    uint64_t n = cfg.numa_nodes;
    if (cfg.numa_lat_n == 0) { /* one latency for every node: mem_lat */
        for (uint64_t i = 0; i < n; i++)
            for (uint64_t j = 0; j < n; j++)
                numa_lat_m[i][j] = cfg.mem_lat;
    } else {
        if (cfg.numa_lat_n != n * n)
            return fail("numa_lat has %u values; numa_nodes=%" PRIu64 " needs %" PRIu64 " (row-major, [vCPU node]"
                        "[memory node], in cycles)", cfg.numa_lat_n, n, n * n);
        for (uint64_t i = 0; i < n; i++)
            for (uint64_t j = 0; j < n; j++) {
                numa_lat_m[i][j] = cfg.numa_lat[i * n + j];
                uint64_t above = cfg.l3_size ? cfg.l3_lat : cfg.l2_size ? cfg.l2_lat : cfg.l1d_lat;
                if (numa_lat_m[i][j] < above)
                    return fail("numa_lat[%" PRIu64 "][%" PRIu64 "]=%" PRIu64 " is below the last cache level's "
                                "latency (%" PRIu64 ")", i, j, numa_lat_m[i][j], above);
            }
    }
    if (cfg.numa_mem_n && cfg.numa_mem_n != n)
        return fail("numa_mem has %u values; numa_nodes=%" PRIu64 " needs one size in bytes per node", cfg.numa_mem_n,
                    n);
    for (unsigned i = 0; i < cfg.numa_cpus_n; i++)
        if (cfg.numa_cpus[i] >= n)
            return fail("numa_cpus: vCPU %u is on node %" PRIu64 ", but numa_nodes=%" PRIu64, i, cfg.numa_cpus[i], n);
    if (cfg.numa_interleave && (!is_pow2(cfg.numa_interleave) || cfg.numa_interleave < 64))
        return fail("numa_interleave=%" PRIu64 " must be 0 (off) or a power of two of at least 64 bytes",
                    cfg.numa_interleave);
    if (!is_pow2(cfg.page)) /* its range is the table's */
        return fail("page=%" PRIu64 " must be a power of two between 256 and 1073741824 bytes", cfg.page);
    if (cfg.page < cfg.l1d_line || cfg.page < cfg.l1i_line)
        return fail("page=%" PRIu64 " is smaller than an L1 line", cfg.page);
    if (check_geometry("itlb_entries", cfg.itlb_entries, "itlb_assoc", &cfg.itlb_assoc, NULL, 1, true) ||
        check_geometry("dtlb_entries", cfg.dtlb_entries, "dtlb_assoc", &cfg.dtlb_assoc, NULL, 1, true))
        return -1;
    if (cfg.stlb_entries) {
        if (check_geometry("stlb_entries", cfg.stlb_entries, "stlb_assoc", &cfg.stlb_assoc, NULL, 1, true))
            return -1;
    } /* stlb_entries=0: no second-level TLB; stlb_assoc and stlb_lat are unused */
    if (cfg.trap_table && (cfg.arch != ARCH_SPARC64 || (cfg.trap_table & 0x7fff)))
        return fail("trap_table=%" PRIu64 " is not valid: the address of a sparc64 guest kernel's trap table "
                    "(TBA: a multiple of 32768; arch=sparc64 only)", cfg.trap_table);
    if (cfg.arch == ARCH_SPARC64) {
        if (!opt_given[OPT_nwindows])
            cfg.nwindows = 8;
        if (cfg.nwindows && (cfg.nwindows < 3 || cfg.nwindows > 32))
            return fail("nwindows=%" PRIu64 " is not valid: SPARC V9 has 3 to 32 register windows (0 = not "
                        "modelled)", cfg.nwindows);
        /* SPARC traps every misaligned access unless told otherwise */
        if (!opt_given[OPT_unaligned2])
            cfg.unaligned2 = POL_TRAP;
        if (!opt_given[OPT_unaligned4])
            cfg.unaligned4 = POL_TRAP;
        if (!opt_given[OPT_unaligned8])
            cfg.unaligned8 = POL_TRAP;
    } else if (cfg.nwindows) {
        return fail("nwindows=%" PRIu64 " is only for arch=sparc64 (0 = not SPARC)", cfg.nwindows);
    }
    unaligned_pol[2] = cfg.unaligned2;
    unaligned_pol[4] = cfg.unaligned4;
    unaligned_pol[8] = cfg.unaligned8;
    /* the core's window and the hardware prefetchers (timing.c) */
    if (cfg.core == 1 && (!cfg.rob || !cfg.lq || !cfg.sb))
        return fail("core=ooo needs its window: rob, lq and sb of at least 1 (got rob=%" PRIu64 " lq=%" PRIu64
                    " sb=%" PRIu64 ")", cfg.rob, cfg.lq, cfg.sb);
    if (cfg.core == 0) {
        static const char *const pf[] = {"l1d_pf_next", "l1d_pf_adj", "l1d_pf_stride", "l1d_pf_stream",
                                         "l2_pf_next", "l2_pf_adj", "l2_pf_stride", "l2_pf_stream"};
        const uint64_t val[] = {cfg.l1d_pf_next, cfg.l1d_pf_adj, cfg.l1d_pf_stride, cfg.l1d_pf_stream,
                                cfg.l2_pf_next, cfg.l2_pf_adj, cfg.l2_pf_stride, cfg.l2_pf_stream};
        for (unsigned i = 0; i < sizeof val / sizeof val[0]; i++)
            if (val[i])
                return fail("%s=%" PRIu64 ": hardware prefetchers run on the out-of-order core's timeline "
                            "(core=ooo); with core=inorder every miss is charged in full", pf[i], val[i]);
    }
    if (cfg.l2_pf_next + cfg.l2_pf_adj + cfg.l2_pf_stride + cfg.l2_pf_stream && !cfg.l2_size)
        return fail("an L2 prefetcher (l2_pf_*) needs an L2 (l2_size=0)");
    return 0;
}

/* ------------------------------------------------------------ echo and help */

/* Every effective value under "options" in the stats JSON (a STR is not echoed;
 * a fully associative assoc is its way count; numa_lat the matrix in use). */
void put_options(Str *s)
{
    char buf[64];
    bool first = true;
    sput(s, "  \"options\": {");
    for (int i = 0; i < OPT_COUNT; i++) {
        const Opt *o = &opts[i];
        const char *p = (const char *)&cfg + o->off;
        if (o->kind == K_STR)
            continue;
        sput(s, "%s\n    \"%s\": ", first ? "" : ",", o->name);
        first = false;
        switch (o->kind) {
        case K_U64:
            sput(s, "%" PRIu64, *(const uint64_t *)p);
            break;
        case K_F64:
        case K_F64P:
            sput(s, "%.17g", *(const double *)p);
            break;
        case K_ENUM:
            sput(s, "\"%s\"", enum_value(o, *(const int *)p, buf, sizeof buf));
            break;
        case K_LIST: {
            unsigned n = *(const unsigned *)((const char *)&cfg + o->n_off);
            sput(s, "[");
            for (unsigned k = 0; k < n; k++)
                sput(s, "%s%" PRIu64, k ? ", " : "", ((const uint64_t *)p)[k]);
            sput(s, "]");
            break;
        }
        case K_MATRIX:
            sput(s, "[");
            for (unsigned r = 0; r < cfg.numa_nodes; r++) {
                sput(s, "%s[", r ? ", " : "");
                for (unsigned c = 0; c < cfg.numa_nodes; c++)
                    sput(s, "%s%" PRIu64, c ? ", " : "", numa_lat_m[r][c]);
                sput(s, "]");
            }
            sput(s, "]");
            break;
        case K_STR:
            break;
        }
    }
    sput(s, "\n  },\n");
}

/* help=json: the table as JSON, on stdout or to out=. Returns 1 when it was
 * printed (the caller ends the run), 0 when not asked, -1 on an error. */
int options_help(int argc, char **argv)
{
    const char *what = NULL, *out = NULL;
    for (int i = 0; i < argc; i++)
        if (!strncmp(argv[i], "help=", 5))
            what = argv[i] + 5;
        else if (!strncmp(argv[i], "out=", 4))
            out = argv[i] + 4;
    if (!what)
        return 0;
    if (strcmp(what, "json"))
        return fail("help=%s is not valid; choose one of: json", what);
    Str s = {0};
    sput(&s, "{\"tool\": \"trapline-model\", \"options\": [");
    for (int i = 0; i < OPT_COUNT; i++) {
        const Opt *o = &opts[i];
        sput(&s, "%s\n  {\"name\": \"%s\", \"kind\": \"%s\", \"default\": ", i ? "," : "", o->name,
             kind_names[o->kind]);
        put_json_string(&s, o->def);
        sput(&s, ", \"min\": %" PRIu64 ", \"max\": %" PRIu64 ", \"unit\": ", o->min, o->max);
        put_json_string(&s, o->unit);
        sput(&s, ", \"field\": ");
        put_json_string(&s, o->field);
        sput(&s, ", \"conv\": ");
        put_json_string(&s, o->conv);
        sput(&s, ", \"doc\": ");
        put_json_string(&s, o->doc);
        sput(&s, "}");
    }
    sput(&s, "\n]}\n");
    FILE *f = out && *out ? fopen(out, "w") : stdout;
    if (!f)
        return fail("help=json: cannot write %s: %s", out, strerror(errno));
    bool ok = fwrite(s.buf, 1, s.len, f) == s.len;
    ok = (f == stdout ? fflush(f) == 0 : fclose(f) == 0) && ok;
    free(s.buf);
    return ok ? 1 : fail("help=json: cannot write %s", out && *out ? out : "stdout");
}
