"""Inputs for the transcendental accuracy test (test_transcendental.py): for each function
and float dtype, `size` values spread over the whole range, dense near the interesting
regions, the edge cases first. Deterministic (seeded)."""
import numpy as np

UNARY = ("exp", "log", "log1p", "expm1", "sin", "cos", "tanh")


def edges(dtype):
    """Zeros, infinities, NaN, the largest finite, the smallest normal and subnormal, both signs."""
    f = np.finfo(dtype)
    tiny_sub = np.array(1, dtype=f"u{np.dtype(dtype).itemsize}").view(dtype)
    values = [0.0, np.inf, np.nan, f.max, f.tiny, tiny_sub, f.tiny * 0.5, f.eps, f.eps / 2, 1.0, 0.5, 2.0,
              np.nextafter(dtype(1), dtype(2)), np.nextafter(dtype(1), dtype(0)), np.pi / 2, np.pi, 2 * np.pi,
              np.nextafter(f.max, dtype(0))]
    out = np.array(values, dtype=dtype)
    return np.concatenate([out, -out])


def _log_uniform_bits(rng, dtype, n):
    """Uniformly random bit patterns without the NaN ones: magnitudes log-uniform over every
    exponent, subnormals included, both signs."""
    bits = np.dtype(f"u{np.dtype(dtype).itemsize}")
    x = rng.integers(0, np.iinfo(bits).max, size=n, dtype=bits, endpoint=True).view(dtype)
    return x[np.isfinite(x)]


def _uniform(rng, dtype, lo, hi, n):
    return rng.uniform(lo, hi, size=n).astype(dtype)


def _around(rng, dtype, centre, width_ulps, n):
    """Values within width_ulps units in the last place of centre (and its negative use)."""
    c = np.asarray(centre, dtype=dtype)
    bits = np.dtype(f"i{np.dtype(dtype).itemsize}")
    steps = rng.integers(-width_ulps, width_ulps, size=n, endpoint=True)
    return (c.view(bits) + steps.astype(bits)).view(dtype)


def _log_range(rng, dtype, lo_exp, hi_exp, n, signs=True):
    """Magnitudes 10**u for u uniform in [lo_exp, hi_exp], random signs."""
    x = 10.0 ** rng.uniform(lo_exp, hi_exp, size=n)
    if signs:
        x *= rng.choice([-1.0, 1.0], size=n)
    return x.astype(dtype)


def unary_inputs(fn, dtype, size, seed=0):
    """`size` inputs (about) for fn at dtype: the edges, a third random bit patterns, the rest
    dense regions for fn."""
    dtype = np.dtype(dtype).type
    rng = np.random.default_rng([seed, UNARY.index(fn), np.dtype(dtype).itemsize])
    f = np.finfo(dtype)
    wide = np.dtype(dtype).itemsize == 8
    parts = [edges(dtype), _log_uniform_bits(rng, dtype, size // 3)]
    rest = size - sum(len(p) for p in parts)
    k = rest // 4
    if fn in ("exp", "expm1"):
        over = np.log(f.max)  # overflow threshold
        under = np.log(f.tiny) - (52 if wide else 23) * np.log(2)  # last subnormal
        parts += [_uniform(rng, dtype, under - 2, over + 2, k),
                  np.concatenate([_around(rng, dtype, over, 2 ** 20, k // 3),
                                  _around(rng, dtype, under, 2 ** 20, k // 3),
                                  _around(rng, dtype, np.log(f.tiny), 2 ** 20, k - 2 * (k // 3))]),
                  _log_range(rng, dtype, np.log10(f.tiny), 0, k),
                  _uniform(rng, dtype, -2, 2, rest - 3 * k)]
    elif fn in ("log", "log1p"):
        one = 1.0 if fn == "log" else 0.0
        parts += [np.abs(_log_uniform_bits(rng, dtype, k)),
                  _uniform(rng, dtype, one - 0.5, one + 1, k),
                  (one + _log_range(rng, dtype, np.log10(f.eps) - 30, -1, k)).astype(dtype),
                  np.concatenate([_around(rng, dtype, 1.0, 2 ** 16, k // 2),
                                  _uniform(rng, dtype, -1, -0.5 if fn == "log1p" else 0,
                                           rest - 3 * k - k // 2)])]
    elif fn in ("sin", "cos"):
        parts += [_uniform(rng, dtype, -10, 10, k),
                  _log_range(rng, dtype, 1, 6 if not wide else 8, k),
                  _log_range(rng, dtype, 6, np.log10(f.max), k),
                  np.concatenate([(np.pi / 2 * rng.integers(-10 ** 5, 10 ** 5, size=k // 2)).astype(dtype),
                                  _log_range(rng, dtype, np.log10(f.tiny), 0, rest - 3 * k - k // 2)])]
    else:  # tanh
        saturation = 19.1 if wide else 9.1
        parts += [_uniform(rng, dtype, -saturation - 2, saturation + 2, k),
                  _log_range(rng, dtype, np.log10(f.tiny), 0, k),
                  _uniform(rng, dtype, -1, 1, k),
                  _log_range(rng, dtype, 0, np.log10(f.max), rest - 3 * k)]
    return np.concatenate([p.astype(dtype) for p in parts])


def pow_bases(dtype, n, seed=0):
    """n bases for pow: the special values, random bit patterns, magnitudes 1e-3..1e3."""
    dtype = np.dtype(dtype).type
    rng = np.random.default_rng([seed, 98, np.dtype(dtype).itemsize])
    f = np.finfo(dtype)
    special = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 0.5, 2.0, 10.0, -2.0, f.tiny, f.max,
                        np.nextafter(dtype(1), dtype(2)), np.nextafter(dtype(1), dtype(0)),
                        np.array(1, dtype=f"u{np.dtype(dtype).itemsize}").view(dtype)], dtype=dtype)
    rest = n - len(special)
    return np.concatenate([special, _log_uniform_bits(rng, dtype, rest // 2),
                           _log_range(rng, dtype, -3, 3, rest - rest // 2)])[:n].astype(dtype)


def pow_grid(dtype, bases, exponents, seed=0):
    """(x, y): every base with every exponent, the special values of both included."""
    dtype = np.dtype(dtype).type
    rng = np.random.default_rng([seed, 99, np.dtype(dtype).itemsize])
    special = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, 0.5, -0.5, 1 / 3, 10.0, 100.0, 1e10, -1e10, np.inf,
                        -np.inf, np.nan, 1023.5, -1074.0, 0.1], dtype=dtype)
    n = exponents - len(special)
    e = np.concatenate([special, rng.integers(-40, 40, size=n // 4).astype(dtype),
                        _uniform(rng, dtype, -10, 10, n // 4), _log_range(rng, dtype, -8, 3, n - 2 * (n // 4))])
    x, y = np.meshgrid(pow_bases(dtype, bases, seed), e.astype(dtype), indexing="ij")
    return x.ravel(), y.ravel()
