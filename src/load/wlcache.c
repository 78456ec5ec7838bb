#include "load/wlcache.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

typedef struct entry {
    unsigned char key[ST_WLCACHE_KEY_MAX];
    size_t keylen;
    st_workload w;
    size_t bytes;
    int refs;
    uint64_t used; /* the cache's clock at its last lookup */
} entry;

struct st_wlcache {
    pthread_mutex_t mu;
    size_t max_bytes, bytes;
    entry **e; /* each its own allocation: a borrowed workload stays where it is as the list grows */
    size_t n, cap;
    uint64_t clock, hits, made;
};

st_wlcache *st_wlcache_new(size_t max_bytes)
{
    st_wlcache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->max_bytes = max_bytes ? max_bytes : ST_WLCACHE_BYTES_DEFAULT;
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

static void entry_free(entry *x)
{
    st_workload_free(&x->w);
    free(x);
}

void st_wlcache_free(st_wlcache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++)
        entry_free(c->e[i]);
    free(c->e);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static size_t workload_bytes(const st_workload *w)
{
    size_t b = sizeof *w->items * w->n;
    for (uint32_t i = 0; i < w->n; i++)
        b += sizeof(uint32_t) * (w->items[i].lazy ? 0 : w->items[i].input_len);
    if (w->n && w->items[0].lazy) /* their shared prefix, once */
        b += sizeof(uint32_t) * w->items[0].own_from;
    return b;
}

/* The entry holding key, or NULL (under the lock). */
static entry *find(st_wlcache *c, const void *key, size_t keylen)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->e[i]->keylen == keylen && !memcmp(c->e[i]->key, key, keylen))
            return c->e[i];
    return NULL;
}

/* Drops the least recently used entries nobody holds while the cache is over its budget (under
 * the lock). */
static void evict(st_wlcache *c)
{
    while (c->bytes > c->max_bytes) {
        size_t victim = c->n;
        for (size_t i = 0; i < c->n; i++)
            if (!c->e[i]->refs && (victim == c->n || c->e[i]->used < c->e[victim]->used))
                victim = i;
        if (victim == c->n)
            return;
        c->bytes -= c->e[victim]->bytes;
        entry_free(c->e[victim]);
        c->e[victim] = c->e[--c->n];
    }
}

/* The entry of key borrowed (under the lock), or NULL. */
static const st_workload *borrow(st_wlcache *c, entry *x)
{
    x->refs++;
    x->used = ++c->clock;
    return &x->w;
}

const st_workload *st_wlcache_get(st_wlcache *c, const void *key, size_t keylen,
                                  int (*make)(void *arg, st_workload *w, char *err, size_t errlen), void *arg,
                                  char *err, size_t errlen)
{
    if (keylen > ST_WLCACHE_KEY_MAX) {
        snprintf(err, errlen, "workload cache: a key of %zu bytes (at most %d)", keylen, ST_WLCACHE_KEY_MAX);
        return NULL;
    }
    pthread_mutex_lock(&c->mu);
    entry *x = find(c, key, keylen);
    if (x) {
        c->hits++;
        const st_workload *w = borrow(c, x);
        pthread_mutex_unlock(&c->mu);
        return w;
    }
    pthread_mutex_unlock(&c->mu);
    x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (make(arg, &x->w, err, errlen)) {
        free(x);
        return NULL;
    }
    memcpy(x->key, key, keylen);
    x->keylen = keylen;
    x->bytes = workload_bytes(&x->w);
    pthread_mutex_lock(&c->mu);
    c->made++;
    entry *had = find(c, key, keylen); /* another thread made it meanwhile: the same workload */
    if (had) {
        const st_workload *w = borrow(c, had);
        pthread_mutex_unlock(&c->mu);
        entry_free(x);
        return w;
    }
    if (st_grow((void **)&c->e, &c->cap, c->n + 1, sizeof *c->e, 16)) {
        pthread_mutex_unlock(&c->mu);
        entry_free(x);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->e[c->n++] = x;
    c->bytes += x->bytes;
    const st_workload *w = borrow(c, x);
    evict(c);
    pthread_mutex_unlock(&c->mu);
    return w;
}

void st_wlcache_put(st_wlcache *c, const st_workload *w)
{
    if (!c || !w)
        return;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n; i++)
        if (&c->e[i]->w == w) {
            c->e[i]->refs--;
            break;
        }
    evict(c);
    pthread_mutex_unlock(&c->mu);
}

void st_wlcache_counts(st_wlcache *c, uint64_t *hits, uint64_t *made)
{
    pthread_mutex_lock(&c->mu);
    *hits = c->hits;
    *made = c->made;
    pthread_mutex_unlock(&c->mu);
}
