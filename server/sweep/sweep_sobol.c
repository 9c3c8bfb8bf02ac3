/* Sobol' low-discrepancy points for a stage's `search: {method: sobol}`:
 * the unscrambled sequence with the direction numbers of Joe & Kuo (2008,
 * "Constructing Sobol sequences with better two-dimensional projections",
 * file new-joe-kuo-6.21201) in Gray-code order, as their own generator and
 * scipy.stats.qmc.Sobol(scramble=False) produce it: point 0 is the origin,
 * points 0 .. 2^k - 1 put exactly one point in every interval of length
 * 2^-k of each dimension.
 *
 * The scrambled sequence (`scramble: true`) is the randomisation of
 * scipy.stats.qmc.Sobol(scramble=True): a linear matrix scramble
 * (Matousek 1998), x -> L x over GF(2) with L random lower triangular with
 * unit diagonal (digit i of the result is digit i of x plus a random sum
 * of the digits before it), then a random digital shift (xor).  Both keep
 * the net property, move point 0 off the origin, and draw their bits
 * from rng.h keyed by (seed, dimension): a point is a pure function of
 * (seed, index). */
#include "sweep_internal.h"

#include "rng.h"

#define SOBOL_BITS 32

/* The scramble's stream of the counter-based generator (rng.h). */
#define SCRAMBLE_STREAM 0x50b01ULL

/* Dimensions 2 .. SWEEP_SOBOL_MAX_DIMS: the degree s of the primitive
 * polynomial, its inner coefficients a, and the initial direction numbers
 * m_1 .. m_s (dimension 1 is van der Corput's: every m is 1). */
static const struct {
    unsigned s, a, m[6];
} joe_kuo[SWEEP_SOBOL_MAX_DIMS - 1] = {
    {1, 0, {1}},
    {2, 1, {1, 3}},
    {3, 1, {1, 3, 1}},
    {3, 2, {1, 1, 1}},
    {4, 1, {1, 1, 3, 3}},
    {4, 4, {1, 3, 5, 13}},
    {5, 2, {1, 1, 5, 5, 17}},
    {5, 4, {1, 1, 5, 5, 5}},
    {5, 7, {1, 1, 7, 11, 19}},
    {5, 11, {1, 1, 5, 1, 1}},
    {5, 13, {1, 1, 1, 3, 11}},
    {5, 14, {1, 3, 5, 5, 31}},
    {6, 1, {1, 3, 3, 9, 7, 49}},
    {6, 13, {1, 1, 1, 15, 21, 21}},
    {6, 16, {1, 3, 1, 13, 27, 49}},
};

/* v[k] = m_k / 2^(k+1) as a 32-bit fraction, extended by the recurrence
 * of the dimension's primitive polynomial (Bratley & Fox 1988). */
static void directions(size_t dim, uint32_t v[SOBOL_BITS])
{
    if (dim == 0) {
        for (unsigned k = 0; k < SOBOL_BITS; k++)
            v[k] = 1u << (SOBOL_BITS - 1 - k);
        return;
    }
    unsigned s = joe_kuo[dim - 1].s, a = joe_kuo[dim - 1].a;
    for (unsigned k = 0; k < s; k++)
        v[k] = joe_kuo[dim - 1].m[k] << (SOBOL_BITS - 1 - k);
    for (unsigned k = s; k < SOBOL_BITS; k++) {
        v[k] = v[k - s] ^ (v[k - s] >> s);
        for (unsigned j = 1; j < s; j++)
            if ((a >> (s - 1 - j)) & 1)
                v[k] ^= v[k - j];
    }
}

/* Dimension d of point `index`, unscrambled, as a 32-bit fraction. */
static uint32_t sobol_bits(uint32_t index, size_t d)
{
    uint32_t gray = index ^ (index >> 1), v[SOBOL_BITS], x = 0;
    directions(d, v);
    for (unsigned k = 0; k < SOBOL_BITS; k++)
        if ((gray >> k) & 1)
            x ^= v[k];
    return x;
}

void sweep__sobol_point(uint32_t index, size_t dims, double *out)
{
    for (size_t d = 0; d < dims; d++)
        out[d] = (double)sobol_bits(index, d) * 0x1.0p-32;
}

/* L x then the shift, for dimension d under seed: row i of L (the bits
 * that make digit i + 1, bit 31 - i) is that bit and random more
 * significant ones. */
static uint32_t scramble(uint32_t x, uint64_t seed, size_t d)
{
    bf_rng r;
    bf_rng_seed(&r, bf_rng_key(bf_rng_key(seed, SCRAMBLE_STREAM), d));
    uint32_t y = 0;
    for (unsigned i = 0; i < SOBOL_BITS; i++) {
        uint32_t bit = 1u << (SOBOL_BITS - 1 - i);
        uint32_t above = ~(bit | (bit - 1));
        uint32_t row = bit | ((uint32_t)(bf_rng_u64(&r) >> 32) & above);
        if (__builtin_parity(row & x))
            y |= bit;
    }
    return y ^ (uint32_t)(bf_rng_u64(&r) >> 32);
}

void sweep__sobol_scrambled(uint32_t index, size_t dims, uint64_t seed,
                            double *out)
{
    for (size_t d = 0; d < dims; d++)
        out[d] = (double)scramble(sobol_bits(index, d), seed, d) * 0x1.0p-32;
}
