// Drives libCacheSim's own eviction policies, from a libCacheSim build the user
// made (github.com/1a1a11a/libCacheSim; written against commit aa0fc40's public
// API: open_trace, read_one_req, <Policy>_init, cache->find, cache->get), over the
// page references `kvwatch replay --policy P --dump-references FILE` wrote: the
// same sequence kvwatch's policy P simulates (agent/cli/reference_dump.h has the
// format). Not part of kvwatch's build: bench/libcachesim_compare.sh compiles it
// against the user's libCacheSim checkout and build, which this project never
// downloads or vendors.
//
//   libcachesim_driver TRACE POLICY CAPACITY MODE [S3FIFO_PROMOTION_HITS [HASHPOWER]]
//
// POLICY: lru, fifo, arc, s3fifo or sieve (libCacheSim's LRU, FIFO, ARC, S3FIFO,
// Sieve). CAPACITY: objects (every page is one object of size 1). MODE:
//   prefix  kvwatch's rule (curve/policy.h): each request's hits are its leading
//           pages resident when it arrives (cache->find without update, in prefix
//           order: the request's records read backwards, as the dump is tail-first),
//           then every record is one cache->get in file order. The hits are then
//           the page hits `kvwatch replay --policy P` reports, exactly, when the
//           two implementations make the same evictions.
//   get     cachesim's loop: one cache->get per record, a hit when it returns true.
// The cache evolves the same in both modes (find without update changes nothing);
// only what counts as a hit differs. S3FIFO_PROMOTION_HITS: S3FIFO's
// move-to-main-threshold (default 2, libCacheSim's). HASHPOWER: log2 of the hash
// tables' initial buckets (default 24, what cachesim gives every cache,
// bin/cachesim/cache_init.h; they double when they hold 2 objects a bucket).
//
// The trace is read whole with libCacheSim's reader first (load_s); sim_s and
// sim_cpu_s time the simulation loop alone (wall, process CPU). One line out:
//   policy=lru capacity=14000 mode=prefix requests=R refs=N hits=H hit_ratio=...
//   load_s=... sim_s=... sim_cpu_s=... mrefs_per_cpu_s=...
//
// libCacheSim's ARC_find(cache, req, false) dereferences the object it looked up
// even when there is none (ARC.c at aa0fc40: `return obj->ARC.ghost ? NULL : obj`),
// so for arc the check looks the page up in the cache's hash table and takes a
// ghost entry as not resident, which is what that line means to do.
#define _GNU_SOURCE
#include <libCacheSim.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dataStructure/hashtable/hashtable.h"

static double Seconds(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void Die(const char* what) {
  fprintf(stderr, "libcachesim_driver: %s\n", what);
  exit(2);
}

int main(int argc, char** argv) {
  if (argc < 5 || argc > 7) {
    Die("usage: libcachesim_driver TRACE lru|fifo|arc|s3fifo|sieve CAPACITY prefix|get [S3FIFO_PROMOTION_HITS "
        "[HASHPOWER]]");
  }
  const char* path = argv[1];
  const char* policy = argv[2];
  char* end = NULL;
  const long long capacity = strtoll(argv[3], &end, 10);
  if (*end != '\0' || capacity < 1) Die("CAPACITY must be a whole number of objects >= 1");
  const int prefix = strcmp(argv[4], "prefix") == 0;
  if (!prefix && strcmp(argv[4], "get") != 0) Die("MODE must be prefix or get");
  const char* promotion = argc >= 6 ? argv[5] : "2";
  const int hashpower = argc >= 7 ? atoi(argv[6]) : 24;
  if (hashpower < 4 || hashpower > 30) Die("HASHPOWER must be from 4 to 30");

  // The whole trace, read with libCacheSim's own reader.
  double t0 = Seconds(CLOCK_MONOTONIC);
  reader_init_param_t params = default_reader_init_params();
  params.ignore_obj_size = true;
  reader_t* reader = open_trace(path, ORACLE_GENERAL_TRACE, &params);
  if (reader == NULL) Die("cannot open the trace");
  const uint64_t total = get_num_of_req(reader);
  uint64_t* ids = malloc(sizeof(uint64_t) * (total + 1));
  int64_t* times = malloc(sizeof(int64_t) * (total + 1));
  int64_t* next = malloc(sizeof(int64_t) * (total + 1));
  if (ids == NULL || times == NULL || next == NULL) Die("out of memory");
  request_t* req = new_request();
  uint64_t n = 0;
  while (n < total && read_one_req(reader, req) == 0 && req->valid) {
    ids[n] = req->obj_id;
    times[n] = req->clock_time;
    next[n] = req->next_access_vtime;
    ++n;
  }
  close_trace(reader);
  const double load_s = Seconds(CLOCK_MONOTONIC) - t0;

  common_cache_params_t cc = default_common_cache_params();
  cc.cache_size = (uint64_t)capacity;
  cc.hashpower = hashpower;
  cc.consider_obj_metadata = false;
  cache_t* cache = NULL;
  int arc = 0;
  if (strcmp(policy, "lru") == 0) {
    cache = LRU_init(cc, NULL);
  } else if (strcmp(policy, "fifo") == 0) {
    cache = FIFO_init(cc, NULL);
  } else if (strcmp(policy, "arc") == 0) {
    cache = ARC_init(cc, NULL);
    arc = 1;
  } else if (strcmp(policy, "s3fifo") == 0) {
    char s3[64];
    snprintf(s3, sizeof(s3), "move-to-main-threshold=%s", promotion);
    cache = S3FIFO_init(cc, s3);
  } else if (strcmp(policy, "sieve") == 0) {
    cache = Sieve_init(cc, NULL);
  } else {
    Die("POLICY must be lru, fifo, arc, s3fifo or sieve");
  }

  uint64_t hits = 0, requests = 0;
  req->obj_size = 1;
  const double w0 = Seconds(CLOCK_MONOTONIC), c0 = Seconds(CLOCK_PROCESS_CPUTIME_ID);
  if (prefix) {
    for (uint64_t begin = 0; begin < n;) {
      uint64_t stop = begin + 1;
      while (stop < n && times[stop] == times[begin]) ++stop;
      ++requests;
      // The prefix is the request's records read backwards (tail-first dump).
      for (uint64_t k = stop; k-- > begin;) {
        req->obj_id = ids[k];
        cache_obj_t* obj = NULL;
        if (arc) {
          obj = hashtable_find_obj_id(cache->hashtable, ids[k]);
          if (obj != NULL && obj->ARC.ghost) obj = NULL;
        } else {
          obj = cache->find(cache, req, false);
        }
        if (obj == NULL) break;
        ++hits;
      }
      for (uint64_t k = begin; k < stop; ++k) {
        req->obj_id = ids[k];
        req->clock_time = times[k];
        req->next_access_vtime = next[k];
        cache->get(cache, req);
      }
      begin = stop;
    }
  } else {
    for (uint64_t k = 0; k < n; ++k) {
      if (k == 0 || times[k] != times[k - 1]) ++requests;
      req->obj_id = ids[k];
      req->clock_time = times[k];
      req->next_access_vtime = next[k];
      if (cache->get(cache, req)) ++hits;
    }
  }
  const double sim_s = Seconds(CLOCK_MONOTONIC) - w0, sim_cpu_s = Seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;

  printf(
      "policy=%s capacity=%lld mode=%s hashpower=%d requests=%llu refs=%llu hits=%llu hit_ratio=%.6f load_s=%.3f "
      "sim_s=%.3f "
      "sim_cpu_s=%.3f mrefs_per_cpu_s=%.3f\n",
      policy, capacity, prefix ? "prefix" : "get", hashpower, (unsigned long long)requests, (unsigned long long)n,
      (unsigned long long)hits, n == 0 ? 0.0 : (double)hits / (double)n, load_s, sim_s, sim_cpu_s,
      sim_cpu_s > 0 ? (double)n / sim_cpu_s / 1e6 : 0.0);
  cache->cache_free(cache);
  free_request(req);
  free(ids);
  free(times);
  free(next);
  return 0;
}
