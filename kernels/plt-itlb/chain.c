/*
 * plt-itlb chain: 26 routines a -> b -> ... -> z, each calling the next.
 *
 * From the method in shared/claims.md E7 (Gove, "Libraries (4) - Runtime
 * costs - Procedure Lookup Table (PLT)" and "Libraries (5) - Runtime costs -
 * TLBs"). This one file is compiled four ways (see kernel.mk):
 *
 *   plain                    all 26 routines global, linked into the static
 *                            executable plt-exe: direct calls
 *   -fPIC, libplt-chain.so   all 26 global with default visibility in one
 *                            shared library (not -Bsymbolic): every call to
 *                            b..z goes through the library's PLT, because
 *                            another object could interpose them
 *   -DCHAIN_INTERNAL         libplt-internal.so: b..z are static, only the
 *                            entry a is exported: direct calls, no PLT
 *   -DCHAIN_ONLY=R_x -DCHAIN_SELF=x
 *                            libplt_x.so holds routine x only (26 libraries,
 *                            each routine on its own pages); every call goes
 *                            through the caller's PLT into another library
 *
 * Every routine does `return next(arg) + 1` (not a tail call, so each call
 * returns through its caller); z does a little arithmetic on its argument. noipa keeps
 * gcc from inlining, cloning or otherwise looking through the routines, so
 * the chain stays 26 real calls in every build (tests/test_20_kernels.py
 * checks the call instructions through disasm.yaml).
 */
#ifdef CHAIN_INTERNAL
#define VIS static
#else
#define VIS
#endif
#define ROUTINE __attribute__((noipa))

#define R_a 1
#define R_b 2
#define R_c 3
#define R_d 4
#define R_e 5
#define R_f 6
#define R_g 7
#define R_h 8
#define R_i 9
#define R_j 10
#define R_k 11
#define R_l 12
#define R_m 13
#define R_n 14
#define R_o 15
#define R_p 16
#define R_q 17
#define R_r 18
#define R_s 19
#define R_t 20
#define R_u 21
#define R_v 22
#define R_w 23
#define R_x 24
#define R_y 25
#define R_z 26

#ifdef CHAIN_ONLY
#define WANT(r) (CHAIN_ONLY == (r))
#else
#define WANT(r) 1
#endif

unsigned a(unsigned);
VIS unsigned b(unsigned), c(unsigned), d(unsigned), e(unsigned), f(unsigned), g(unsigned),
    h(unsigned), i(unsigned), j(unsigned), k(unsigned), l(unsigned), m(unsigned), n(unsigned),
    o(unsigned), p(unsigned), q(unsigned), r(unsigned), s(unsigned), t(unsigned), u(unsigned),
    v(unsigned), w(unsigned), x(unsigned), y(unsigned), z(unsigned);

/* Each routine also gets a hidden alias, self_addr: taking its address gives
 * the routine's own entry point even where the executable's PLT entry is the
 * canonical address of the exported name (sparc64 does that for a). */
#define ADDR_ALIAS(self) extern __typeof(self) self##_addr __attribute__((alias(#self), visibility("hidden")));

#define LINK(self, next)                                                        \
    ROUTINE VIS unsigned self(unsigned arg)                                     \
    {                                                                           \
        return next(arg) + 1;                                                   \
    }                                                                           \
    ADDR_ALIAS(self)

/* The entry is always exported. */
#if WANT(R_a)
ROUTINE unsigned a(unsigned arg)
{
    return b(arg) + 1;
}
ADDR_ALIAS(a)
#endif

#if WANT(R_b)
LINK(b, c)
#endif
#if WANT(R_c)
LINK(c, d)
#endif
#if WANT(R_d)
LINK(d, e)
#endif
#if WANT(R_e)
LINK(e, f)
#endif
#if WANT(R_f)
LINK(f, g)
#endif
#if WANT(R_g)
LINK(g, h)
#endif
#if WANT(R_h)
LINK(h, i)
#endif
#if WANT(R_i)
LINK(i, j)
#endif
#if WANT(R_j)
LINK(j, k)
#endif
#if WANT(R_k)
LINK(k, l)
#endif
#if WANT(R_l)
LINK(l, m)
#endif
#if WANT(R_m)
LINK(m, n)
#endif
#if WANT(R_n)
LINK(n, o)
#endif
#if WANT(R_o)
LINK(o, p)
#endif
#if WANT(R_p)
LINK(p, q)
#endif
#if WANT(R_q)
LINK(q, r)
#endif
#if WANT(R_r)
LINK(r, s)
#endif
#if WANT(R_s)
LINK(s, t)
#endif
#if WANT(R_t)
LINK(t, u)
#endif
#if WANT(R_u)
LINK(u, v)
#endif
#if WANT(R_v)
LINK(v, w)
#endif
#if WANT(R_w)
LINK(w, x)
#endif
#if WANT(R_x)
LINK(x, y)
#endif
#if WANT(R_y)
LINK(y, z)
#endif

/* The end of the chain: a little work that depends on the argument. */
#if WANT(R_z)
ROUTINE VIS unsigned z(unsigned arg)
{
    return (arg ^ (arg >> 3)) * 5u;
}
ADDR_ALIAS(z)
#endif

/* For the kernel's kind=info line: where the routines are (the static ones
 * of libplt-internal.so included). Not part of the timed chain. */
#ifndef CHAIN_ONLY
void plt_chain_addrs(const void **out)
{
    const void *tab[26] = {(const void *)a_addr, (const void *)b_addr, (const void *)c_addr,
        (const void *)d_addr, (const void *)e_addr, (const void *)f_addr, (const void *)g_addr,
        (const void *)h_addr, (const void *)i_addr, (const void *)j_addr, (const void *)k_addr,
        (const void *)l_addr, (const void *)m_addr, (const void *)n_addr, (const void *)o_addr,
        (const void *)p_addr, (const void *)q_addr, (const void *)r_addr, (const void *)s_addr,
        (const void *)t_addr, (const void *)u_addr, (const void *)v_addr, (const void *)w_addr,
        (const void *)x_addr, (const void *)y_addr, (const void *)z_addr};
    for (int idx = 0; idx < 26; idx++)
        out[idx] = tab[idx];
}
#else
/* One per library: plt_addr_x() returns routine x's entry point. */
#define PLT_CAT2(p, q) p##q
#define PLT_CAT(p, q) PLT_CAT2(p, q)
const void *PLT_CAT(plt_addr_, CHAIN_SELF)(void)
{
    return (const void *)PLT_CAT(CHAIN_SELF, _addr);
}
#endif
