/* A memo of generated workloads, shared by the runs that ask for the same one: a plan's
 * candidates probe many of the same rates with the same seeds and request counts, and each run
 * would otherwise draw the same prompts again. A workload is a pure function of its key (the
 * caller's bytes: every parameter of its generation), so a run given a cached one runs exactly as
 * on a fresh one; a cached workload is read-only (runs that change theirs, such as sessions whose
 * later turns grow, are not for the cache).
 *
 * Thread-safe. A workload is borrowed (st_wlcache_get) and given back (st_wlcache_put); the least
 * recently used ones nobody holds are dropped once the cache holds more than its byte budget. */
#ifndef ST_LOAD_WLCACHE_H
#define ST_LOAD_WLCACHE_H
#include <stddef.h>
#include <stdint.h>

#include "load/workload.h"

/* Bytes of prompts a plan keeps generated: about twenty runs of a thousand 3,000-token prompts. */
#define ST_WLCACHE_BYTES_DEFAULT ((size_t)256 << 20)
/* The longest key. */
#define ST_WLCACHE_KEY_MAX 128

typedef struct st_wlcache st_wlcache;

/* A cache that keeps at most max_bytes of workloads nobody holds (0: the default). NULL when out
 * of memory. */
st_wlcache *st_wlcache_new(size_t max_bytes);
/* Frees the cache and every workload in it (none may still be borrowed). NULL: nothing. */
void st_wlcache_free(st_wlcache *c);

/* The workload of key (keylen <= ST_WLCACHE_KEY_MAX bytes): the cached one, or make(arg, w, err,
 * errlen)'s, cached (made outside the lock: two threads asking at once may both make it; one is
 * kept). Borrowed until st_wlcache_put. NULL with err when make fails or memory runs out. */
const st_workload *st_wlcache_get(st_wlcache *c, const void *key, size_t keylen,
                                  int (*make)(void *arg, st_workload *w, char *err, size_t errlen), void *arg,
                                  char *err, size_t errlen);
/* Gives back a workload st_wlcache_get returned. */
void st_wlcache_put(st_wlcache *c, const st_workload *w);
/* Lookups answered from the cache, and workloads made. */
void st_wlcache_counts(st_wlcache *c, uint64_t *hits, uint64_t *made);

#endif
