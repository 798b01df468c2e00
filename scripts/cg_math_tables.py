#!/usr/bin/env python3
"""Writes erf_coefs.h and trig_table.h (the body of src/codegen_llvm/cg_math_tables.h) into the current directory. Needs mpmath."""
import mpmath as mp
mp.mp.dps = 60
def cheb_fit(f, a, b, deg, N=None, rel=True):
    # least squares on Chebyshev nodes -> near-minimax; returns monomial coefs in variable t (on [a,b]);
    # rel=False weighs absolute error (for a function that crosses zero)
    N = N or 4*deg+40
    xs = [ (a+b)/2 + (b-a)/2*mp.cos(mp.pi*(k+0.5)/N) for k in range(N)]
    A = mp.matrix(N, deg+1); y = mp.matrix(N,1)
    for i,x in enumerate(xs):
        fx = f(x)
        wx = 1/fx if rel else 1
        for j in range(deg+1): A[i,j] = x**j * wx   # relative error weighting unless rel=False
        y[i] = fx * wx
    # solve least squares via QR
    c = mp.qr_solve(A, y)[0]
    return [c[j] for j in range(deg+1)]
def maxrel(f, coefs, a, b, M=2000):
    m = 0
    for k in range(M+1):
        x = a + (b-a)*k/M
        p = sum(mp.mpf(float(c))*x**j for j,c in enumerate(coefs))
        m = max(m, abs(p/f(x)-1))
    return m
import sys
if __name__ != "__main__": pass
out=[]
gA = lambda t: mp.erf(mp.sqrt(t))/mp.sqrt(t) if t > 0 else 2/mp.sqrt(mp.pi)
cA = cheb_fit(gA, mp.mpf(0), mp.mpf(1), 11)
out.append(('erf_a', 0.0, cA))
hB = lambda x: mp.erfc(x)*mp.exp(x**2)
for name,(a,b,deg) in zip(('erf_b','erf_c','erf_d'), [(1,2,16),(2,3.5,17),(3.5,6,18)]):
    a=mp.mpf(a); b=mp.mpf(b); c=(a+b)/2
    f = lambda s: hB(s+c)
    out.append((name, float(c), cheb_fit(f, a-c, b-c, deg)))
# f32 erf (computed in f32): erf(x)/x - 1 in x^2 on [0, 1] (absolute error),
# erfc(x)*exp(x^2) in x - 2 on [1, 3.92] (relative); coefficients are rounded
# to f32 when emitted, and the result checked in ulps by tests/test_jit.c.
out.append(('erf32_a', 0.0, cheb_fit(lambda t: gA(t) - 1, mp.mpf(0), mp.mpf(1), 7, rel=False)))
out.append(('erf32_b', 2.0, cheb_fit(lambda s: hB(s+2), mp.mpf(1)-2, mp.mpf('3.92')-2, 11)))
with open('erf_coefs.h','w') as fh:
    for name, c, co in out:
        fh.write('/* %s: center %r */\nstatic const double %s[%d] = {\n' % (name, c, name.upper(), len(co)))
        fh.write(''.join('    %s,\n' % float(x).hex() for x in co))
        fh.write('};\n')
# f32 sin/cos reduction table: F(eb) = 2^(eb-150) * 2/pi mod 4, split F1 (26 frac bits), F2 (next 28), F3
mp.mp.dps = 200
tp = 2/mp.pi
rows=[]
for eb in range(0, 256):
    e = max(eb,1) - 150
    F = mp.fmod(mp.ldexp(tp, e), 4)
    F1 = mp.floor(F*2**26)/2**26
    F2 = mp.floor((F-F1)*2**54)/2**54
    F3 = F - F1 - F2
    rows.append((float(F1), float(F2), float(F3)))
    assert mp.mpf(float(F1)) == F1 and mp.mpf(float(F2)) == F2
with open('trig_table.h','w') as fh:
    fh.write('static const double CG_TRIG_F32[256][3] = {\n')
    for r in rows: fh.write('    {%s, %s, %s},\n' % tuple(x.hex() for x in r))
    fh.write('};\n')

