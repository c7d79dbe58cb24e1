#!/usr/bin/env python3
"""Coefficients of core/psf/gauss_hermite_psf.cpp's four-lane erf and exp (docs/benchmarks.md,
"CPU engine, ninth pass"). Prints the C++ block pasted there. Needs mpmath.

G(a) = erfc(a) exp(a^2) is entire, so one Chebyshev interpolant on [0, 6] converges: degree 36
reaches a relative error < 2e-16 (checked at 3001 points). It is written as monomials in
s = (a - 3) / 3 for Horner's rule; the largest coefficient is 0.18, so no cancellation.
"""
import struct

import mpmath as mp

mp.mp.dps = 40
LO, HI, N = 0, 6, 36


def G(a):
    return mp.erfc(a) * mp.exp(a * a)


def cheb_monomials(f, lo, hi, n):
    c, h = mp.mpf(lo + hi) / 2, mp.mpf(hi - lo) / 2
    nodes = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / (n + 1)) for k in range(n + 1)]
    vals = [f(c + h * x) for x in nodes]
    cheb = [sum(vals[k] * mp.cos(mp.pi * j * (k + mp.mpf(1) / 2) / (n + 1)) for k in range(n + 1)) * 2 / (n + 1)
            for j in range(n + 1)]
    cheb[0] /= 2
    mono = [mp.mpf(0)] * (n + 1)
    tprev, tcur = [mp.mpf(1)] + [mp.mpf(0)] * n, [mp.mpf(0), mp.mpf(1)] + [mp.mpf(0)] * (n - 1)
    for j in range(n + 1):
        if j == 0:
            t = tprev
        elif j == 1:
            t = tcur
        else:
            tnext = [(2 * tcur[i - 1] if i else 0) - tprev[i] for i in range(n + 1)]
            tprev, tcur = tcur, tnext
            t = tcur
        for i in range(n + 1):
            mono[i] += cheb[j] * t[i]
    return float(c), float(h), [float(m) for m in mono]


def horner(mono, c, h, a):
    s, r = (a - c) / h, 0.0
    for m in reversed(mono):
        r = r * s + m
    return r


def block(name, values, per_line=3):
    lines = [', '.join(repr(v) for v in values[i:i + per_line]) for i in range(0, len(values), per_line)]
    return f'constexpr double {name}[{len(values)}] = {{\n    ' + ',\n    '.join(lines) + '};'


c, h, mono = cheb_monomials(G, LO, HI, N)
err = max(abs(horner(mono, c, h, LO + (HI - LO) * i / 3000) - float(G(mp.mpf(LO + (HI - LO) * i / 3000))))
          / float(G(mp.mpf(LO + (HI - LO) * i / 3000))) for i in range(3001))
bits = struct.unpack('<Q', struct.pack('<d', float(mp.log(2))))[0] & ~((1 << 20) - 1)
ln2hi = struct.unpack('<d', struct.pack('<Q', bits))[0]
print(f'// erfc(a) exp(a^2) on [{LO}, {HI}]: its Chebyshev interpolant of degree {N} as monomials in')
print(f'// s = (a - {c:g}) / {h:g} (relative error {err:.1e} at 3001 points).')
print(block('kErfcP', mono))
print('// ln 2 as a head with its low 20 bits zero (k ln2Hi exact for |k| < 2^20) and a tail.')
print(f'constexpr double kLn2Hi = {ln2hi!r}, kLn2Lo = {float(mp.log(2) - mp.mpf(ln2hi))!r};')
print(f'constexpr double kLog2e = {float(1 / mp.log(2))!r};')
print('// 1 / k!, k = 0..13.')
print(block('kExpTaylor', [float(1 / mp.factorial(k)) for k in range(14)]))
