// Clang thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html):
// GUARDED_BY(mu) on state, REQUIRES(mu) on functions that need the lock held,
// EXCLUDES(mu) on functions that take it. Checked by clang with -Wthread-safety
// (the test command builds the agent so, see scripts/test.sh); no-ops elsewhere.
#ifndef KVWATCH_BASE_THREAD_ANNOTATIONS_H_
#define KVWATCH_BASE_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define KVWATCH_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define KVWATCH_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) KVWATCH_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY KVWATCH_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) KVWATCH_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) KVWATCH_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) KVWATCH_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) KVWATCH_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) KVWATCH_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) KVWATCH_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) KVWATCH_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) KVWATCH_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS KVWATCH_THREAD_ANNOTATION(no_thread_safety_analysis)

#endif  // KVWATCH_BASE_THREAD_ANNOTATIONS_H_
