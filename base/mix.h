// Mix64: splitmix64's finalizer (Steele, Lea and Flood, "Fast splittable
// pseudorandom number generators", 2014): a bijection of 64-bit values whose every
// output bit depends on every input bit. kvwatch uses it wherever page ids, which
// are often small sequential integers in traces, must be spread: hash-table slots,
// spatial sampling, scoping page ids.
#ifndef KVWATCH_BASE_MIX_H_
#define KVWATCH_BASE_MIX_H_

#include <cstdint>

namespace kvwatch::base {

constexpr std::uint64_t Mix64(std::uint64_t z) {
  z ^= z >> 30;
  z *= 0xbf58476d1ce4e5b9ULL;
  z ^= z >> 27;
  z *= 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return z;
}

}  // namespace kvwatch::base

#endif  // KVWATCH_BASE_MIX_H_
