/* Counter-based random numbers for Bifocal.
 *
 * Nothing in Bifocal keeps a global random state: every random draw is a
 * pure function of a key made from (job seed, stream, ...counters), so the
 * same example or the same initial weight comes out no matter how many ranks
 * share the work or whether a run was resumed.
 *
 *   uint64_t key = bf_rng_key(seed, stream);      derive a key
 *   key = bf_rng_key(key, index);                 ...and chain counters
 *   bf_rng r; bf_rng_seed(&r, key);               a small PRNG from the key
 *   bf_rng_below(&r, n), bf_rng_uniform(&r), bf_rng_normal(&r)
 *
 * bf_mix64 is the splitmix64 finaliser (a bijection with full avalanche);
 * the generator is xoshiro256** (Blackman & Vigna), seeded by splitmix64 as
 * its authors recommend.  Header-only: every function is static inline and
 * state lives in the caller's bf_rng (no allocation). */
#ifndef BF_RNG_H
#define BF_RNG_H

#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#define BF_RNG_GOLDEN 0x9e3779b97f4a7c15ULL

static inline uint64_t bf_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* One splitmix64 step: advances *state and returns the next output. */
static inline uint64_t bf_splitmix64(uint64_t *state)
{
    *state += BF_RNG_GOLDEN;
    return bf_mix64(*state);
}

/* Combines a key with one more counter.  For a fixed key the map
 * counter -> new key is a bijection, so distinct indices never share a key;
 * different streams give unrelated sequences of keys. */
static inline uint64_t bf_rng_key(uint64_t key, uint64_t counter)
{
    return bf_mix64(bf_mix64(key + BF_RNG_GOLDEN) ^ counter);
}

typedef struct bf_rng {
    /* private */
    uint64_t s[4];
} bf_rng;

static inline void bf_rng_seed(bf_rng *r, uint64_t key)
{
    uint64_t sm = key;
    for (int i = 0; i < 4; i++)
        r->s[i] = bf_splitmix64(&sm); /* never all zero: splitmix is 1:1 */
}

static inline uint64_t bf_rng_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t bf_rng_u64(bf_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = bf_rng_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = bf_rng_rotl(s[3], 45);
    return result;
}

/* Uniform integer in [0, n), n >= 1, without modulo bias (Lemire's
 * multiply-and-reject on the high 32 bits). */
static inline uint32_t bf_rng_below(bf_rng *r, uint32_t n)
{
    assert(n >= 1);
    uint64_t m = (bf_rng_u64(r) >> 32) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n;
        while (low < threshold) {
            m = (bf_rng_u64(r) >> 32) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

/* Uniform double in [0, 1) with 53 random bits. */
static inline double bf_rng_uniform(bf_rng *r)
{
    return (double)(bf_rng_u64(r) >> 11) * 0x1.0p-53;
}

/* x [n] = floats uniform in [-1, 1): the operands of the numeric tests
 * and benchmarks. */
static inline void bf_rng_fill_signed(bf_rng *r, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 2.0f * (float)bf_rng_uniform(r) - 1.0f;
}

/* Standard normal N(0, 1) by Box-Muller (one draw, the sine half is
 * discarded so that the state stays a plain xoshiro state). */
static inline double bf_rng_normal(bf_rng *r)
{
    double u1 = 1.0 - bf_rng_uniform(r); /* (0, 1]: log stays finite */
    double u2 = bf_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
