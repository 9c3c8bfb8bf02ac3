/* hash: the one non-cryptographic hash of the tree (FNV-1a, 64 bit): job
 * configs (config_hash), a sweep's cells and duplicates, the peers table.
 * Not for anything an attacker may aim collisions at beyond long chains. */
#ifndef BF_HASH_H
#define BF_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t bf_fnv1a64(const void *data, size_t len);

#endif
