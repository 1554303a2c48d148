// Mutex and MutexLock: std::mutex and std::lock_guard with the capability
// annotations clang's thread-safety analysis needs (libstdc++'s own have none),
// the pattern of abseil's Mutex. CondVar waits on a held Mutex.
//
// Thread safety: a Mutex is the synchronization; MutexLock belongs to one scope.
#ifndef KVWATCH_BASE_MUTEX_H_
#define KVWATCH_BASE_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "base/thread_annotations.h"

namespace kvwatch::base {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // The underlying mutex, for std::condition_variable; callers hold the lock.
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() RELEASE() { mu_.Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

}  // namespace kvwatch::base

#endif  // KVWATCH_BASE_MUTEX_H_
