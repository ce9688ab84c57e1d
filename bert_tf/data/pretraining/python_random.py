"""CPython's random.Random (MT19937) compiled with numba: the same numbers as the original's
`random.Random` draws, in compiled instance creation.

The original makes its instances with `random.Random(seed)`; drawing the same numbers in the
same order from compiled code is what makes the records equal to the original's, byte for byte,
at compiled speed. The state is an int64 array of 625 entries: the 624 words of
`random.Random.getstate()[1]` followed by its position. Every draw below is the one CPython
3.11 makes.
"""
import numpy as np
from numba import njit


def rng_state(rng):
    """The compiled generator's state array for a `random.Random` (which is left untouched)."""
    version, internal, _ = rng.getstate()
    return np.array(internal, dtype=np.int64)


def set_rng_state(rng, state):
    """Puts the compiled generator's state back into a `random.Random`."""
    rng.setstate((3, tuple(int(x) for x in state), None))


@njit(cache=True, nogil=True)
def _mt_twist(mt):
    """Regenerates the 624 words (genrand_uint32's refill, in place as in CPython)."""
    for k in range(227):
        y = (mt[k] & 0x80000000) | (mt[k + 1] & 0x7FFFFFFF)
        mt[k] = mt[k + 397] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
    for k in range(227, 623):
        y = (mt[k] & 0x80000000) | (mt[k + 1] & 0x7FFFFFFF)
        mt[k] = mt[k - 227] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
    y = (mt[623] & 0x80000000) | (mt[0] & 0x7FFFFFFF)
    mt[623] = mt[396] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
    mt[624] = 0


@njit(cache=True, nogil=True)
def _genrand_uint32(mt):
    if mt[624] >= 624:
        _mt_twist(mt)
    y = mt[mt[624]]
    mt[624] += 1
    y ^= y >> 11
    y ^= (y << 7) & 0x9D2C5680
    y ^= (y << 15) & 0xEFC60000
    y ^= y >> 18
    return y


@njit(cache=True, nogil=True)
def random_float(mt):
    """random.Random.random(): 53 bits from two 32-bit words."""
    a = _genrand_uint32(mt) >> 5
    b = _genrand_uint32(mt) >> 6
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0)


@njit(cache=True, nogil=True)
def _bit_length(n):
    k = 0
    if n >= 1 << 16:
        n >>= 16
        k += 16
    if n >= 1 << 8:
        n >>= 8
        k += 8
    while n:
        n >>= 1
        k += 1
    return k


@njit(cache=True, nogil=True)
def randbelow(mt, n):
    """random.Random.randbelow(n) for 0 < n < 2**32: getrandbits(n.bit_length()) until < n."""
    shift = 32 - _bit_length(n)
    r = _genrand_uint32(mt) >> shift
    while r >= n:
        r = _genrand_uint32(mt) >> shift
    return r


@njit(cache=True, nogil=True)
def shuffle(mt, x):
    """random.Random.shuffle(x) on an array: x[i] <-> x[randbelow(i + 1)], i from the end."""
    n = len(x)
    if n < 2:
        return
    shift = 32 - _bit_length(n)
    for i in range(n - 1, 0, -1):
        bound = i + 1
        if bound < (1 << (31 - shift)):  # bound lost a bit: getrandbits(k) with one bit less
            shift += 1
        r = _genrand_uint32(mt) >> shift
        while r >= bound:
            r = _genrand_uint32(mt) >> shift
        tmp = x[i]
        x[i] = x[r]
        x[r] = tmp


@njit(cache=True, nogil=True)
def shuffled_range(mt, n):
    """0, ..., n - 1 in the order random.Random.shuffle(list(range(n))) leaves them."""
    order = np.arange(n)
    shuffle(mt, order)
    return order
