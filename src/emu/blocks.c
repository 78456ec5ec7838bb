#include "emu/blocks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

uint64_t st_emu_block_hash(uint64_t parent, const uint32_t *ids, uint32_t n)
{
    uint64_t h = st_mix64(parent ^ 0x9e3779b97f4a7c15ULL);
    for (uint32_t i = 0; i < n; i++)
        h = st_mix64(h ^ ((uint64_t)ids[i] + 0x632be59bd9b4e019ULL * (i + 1)));
    return h ? h : 1;
}

/* Per-block entries for blocks [0, want): grown by doubling up to n. 0, or -1 out of memory. */
static int ensure_room(st_emu_blocks *p, uint64_t want)
{
    if (want <= p->room)
        return 0;
    uint64_t r = p->room ? p->room : 64;
    while (r < want)
        r *= 2;
    if (r > p->n)
        r = p->n;
    void *a = realloc(p->ref, r * sizeof *p->ref);
    if (!a)
        return -1;
    p->ref = a;
    if (!(a = realloc(p->hash, r * sizeof *p->hash)))
        return -1;
    p->hash = a;
    if (!(a = realloc(p->has_hash, r)))
        return -1;
    p->has_hash = a;
    if (!(a = realloc(p->in_free, r)))
        return -1;
    p->in_free = a;
    if (!(a = realloc(p->prev, r * sizeof *p->prev)))
        return -1;
    p->prev = a;
    if (!(a = realloc(p->next, r * sizeof *p->next)))
        return -1;
    p->next = a;
    p->room = (uint32_t)r;
    return 0;
}

static uint64_t slot_of_cap(uint64_t cap, uint64_t h);

/* The cache map with room for `entries` at a load of at most one half. 0, or -1. */
static int map_reserve(st_emu_blocks *p, uint64_t entries)
{
    uint64_t cap = p->mcap ? p->mcap : 16;
    while (cap < 2 * entries)
        cap *= 2;
    if (cap == p->mcap)
        return 0;
    uint64_t *k = calloc(cap, sizeof *k);
    uint32_t *v = malloc(cap * sizeof *v);
    if (!k || !v) {
        free(k);
        free(v);
        return -1;
    }
    for (uint64_t i = 0; i < cap; i++)
        v[i] = ST_EMU_NIL;
    for (uint64_t i = 0; i < p->mcap; i++) { /* rehash */
        if (p->mval[i] == ST_EMU_NIL)
            continue;
        uint64_t s = slot_of_cap(cap, p->mkey[i]);
        while (v[s] != ST_EMU_NIL)
            s = (s + 1) & (cap - 1);
        k[s] = p->mkey[i];
        v[s] = p->mval[i];
    }
    free(p->mkey);
    free(p->mval);
    p->mkey = k;
    p->mval = v;
    p->mcap = cap;
    return 0;
}

int st_emu_blocks_init(st_emu_blocks *p, uint32_t n, uint32_t block_size)
{
    memset(p, 0, sizeof *p);
    if (n == 0 || n > ST_EMU_BLOCKS_MAX || block_size == 0)
        return -1;
    p->n = n;
    p->block_size = block_size;
    p->head = p->tail = ST_EMU_NIL;
    p->nfree = n;
    if (ensure_room(p, n < 1024 ? n : 1024) < 0 || map_reserve(p, p->room) < 0) {
        st_emu_blocks_free(p);
        return -1;
    }
    return 0;
}

int st_emu_blocks_reserve(st_emu_blocks *p, uint32_t n)
{
    if (n > p->nfree)
        return 0; /* take refuses it anyway */
    uint64_t virgin = p->n - p->used, fresh = n < virgin ? n : virgin;
    if (ensure_room(p, (uint64_t)p->used + fresh) < 0 || map_reserve(p, (uint64_t)p->used + fresh) < 0)
        return -1;
    return 0;
}

void st_emu_blocks_free(st_emu_blocks *p)
{
    free(p->ref);
    free(p->hash);
    free(p->has_hash);
    free(p->in_free);
    free(p->prev);
    free(p->next);
    free(p->mkey);
    free(p->mval);
    memset(p, 0, sizeof *p);
}

static uint64_t slot_of_cap(uint64_t cap, uint64_t h) { return st_mix64(h) & (cap - 1); }
static uint64_t slot_of(const st_emu_blocks *p, uint64_t h) { return slot_of_cap(p->mcap, h); }
uint32_t st_emu_blocks_lookup(const st_emu_blocks *p, uint64_t h)
{
    for (uint64_t s = slot_of(p, h), k = 0; k < p->mcap; k++, s = (s + 1) & (p->mcap - 1)) {
        if (p->mval[s] == ST_EMU_NIL)
            return ST_EMU_NIL;
        if (p->mkey[s] == h)
            return p->mval[s];
    }
    return ST_EMU_NIL;
}

/* The map has room: map_reserve for every block taken (st_emu_blocks_take). */
static void map_put(st_emu_blocks *p, uint64_t h, uint32_t b)
{
    uint64_t s = slot_of(p, h);
    while (p->mval[s] != ST_EMU_NIL) {
        if (p->mkey[s] == h)
            return; /* already cached by another block: keep the first */
        s = (s + 1) & (p->mcap - 1);
    }
    p->mkey[s] = h;
    p->mval[s] = b;
    p->mcount++;
}

static void map_del(st_emu_blocks *p, uint64_t h, uint32_t b)
{
    uint64_t mask = p->mcap - 1, s = slot_of(p, h);
    while (p->mval[s] != ST_EMU_NIL && !(p->mkey[s] == h && p->mval[s] == b))
        s = (s + 1) & mask;
    if (p->mval[s] == ST_EMU_NIL)
        return;
    /* backward-shift deletion */
    uint64_t hole = s, j = s;
    for (;;) {
        j = (j + 1) & mask;
        if (p->mval[j] == ST_EMU_NIL)
            break;
        uint64_t home = slot_of(p, p->mkey[j]);
        /* can the entry at j move to hole? yes if home is not in (hole, j] cyclically */
        int in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!in_range) {
            p->mkey[hole] = p->mkey[j];
            p->mval[hole] = p->mval[j];
            hole = j;
        }
    }
    p->mval[hole] = ST_EMU_NIL;
    p->mcount--;
}

static void fq_remove(st_emu_blocks *p, uint32_t b)
{
    uint32_t pv = p->prev[b], nx = p->next[b];
    if (pv != ST_EMU_NIL)
        p->next[pv] = nx;
    else
        p->head = nx;
    if (nx != ST_EMU_NIL)
        p->prev[nx] = pv;
    else
        p->tail = pv;
    p->prev[b] = p->next[b] = ST_EMU_NIL;
    p->in_free[b] = 0;
    p->nfree--;
}

static void fq_append(st_emu_blocks *p, uint32_t b)
{
    p->prev[b] = p->tail;
    p->next[b] = ST_EMU_NIL;
    if (p->tail != ST_EMU_NIL)
        p->next[p->tail] = b;
    else
        p->head = b;
    p->tail = b;
    p->in_free[b] = 1;
    p->nfree++;
}

void st_emu_blocks_touch(st_emu_blocks *p, uint32_t b)
{
    if (b >= p->used)
        return; /* never taken: holds no hash, nothing looks it up */
    if (p->ref[b] == 0 && p->in_free[b])
        fq_remove(p, b);
    p->ref[b]++;
}

int st_emu_blocks_take(st_emu_blocks *p, uint32_t n, uint32_t *out)
{
    if (n > p->nfree)
        return -1;
    if (st_emu_blocks_reserve(p, n) < 0)
        return -2;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t b;
        if (p->used < p->n) { /* the range of blocks never taken comes first */
            b = p->used++;
            p->has_hash[b] = 0;
            p->prev[b] = p->next[b] = ST_EMU_NIL;
            p->in_free[b] = 0;
            p->nfree--;
        } else {
            b = p->head;
            fq_remove(p, b);
        }
        if (p->has_hash[b]) {
            map_del(p, p->hash[b], b);
            p->has_hash[b] = 0;
            p->evictions++;
        }
        p->ref[b] = 1;
        out[i] = b;
    }
    return 0;
}

void st_emu_blocks_release(st_emu_blocks *p, const uint32_t *blocks, uint32_t n)
{
    for (uint32_t i = n; i-- > 0;) {
        uint32_t b = blocks[i];
        if (b >= p->used || p->ref[b] == 0)
            continue; /* would be a double free: ignored here, caught by st_emu_blocks_check */
        if (--p->ref[b] == 0)
            fq_append(p, b);
    }
}

void st_emu_blocks_set_hash(st_emu_blocks *p, uint32_t b, uint64_t h)
{
    if (b >= p->used || p->has_hash[b])
        return;
    p->has_hash[b] = 1;
    p->hash[b] = h;
    map_put(p, h, b);
}

int st_emu_blocks_reset_cache(st_emu_blocks *p)
{
    if (p->nfree != p->n)
        return -1;
    for (uint32_t b = 0; b < p->used; b++)
        p->has_hash[b] = 0;
    for (uint64_t i = 0; i < p->mcap; i++)
        p->mval[i] = ST_EMU_NIL;
    p->mcount = 0;
    return 0;
}

int st_emu_blocks_check(const st_emu_blocks *p, char *err, size_t errlen)
{
    uint32_t cnt = 0, prev = ST_EMU_NIL;
    for (uint32_t b = p->head; b != ST_EMU_NIL; b = p->next[b]) {
        if (++cnt > p->n) {
            snprintf(err, errlen, "free queue has a cycle");
            return -1;
        }
        if (p->prev[b] != prev) {
            snprintf(err, errlen, "free queue link broken at block %u", b);
            return -1;
        }
        if (p->ref[b] != 0 || !p->in_free[b]) {
            snprintf(err, errlen, "block %u in the free queue with ref %u", b, p->ref[b]);
            return -1;
        }
        prev = b;
    }
    if (p->used > p->n || (uint64_t)cnt + (p->n - p->used) != p->nfree || prev != p->tail) {
        snprintf(err, errlen, "free queue length %u and %u never taken, counter %u", cnt, p->n - p->used, p->nfree);
        return -1;
    }
    uint32_t zero = p->n - p->used;
    uint64_t hashed = 0;
    for (uint32_t b = 0; b < p->used; b++) {
        if (p->ref[b] == 0)
            zero++;
        if (p->ref[b] == 0 && !p->in_free[b]) {
            snprintf(err, errlen, "block %u unreferenced but not free (leaked)", b);
            return -1;
        }
        if (p->has_hash[b] && st_emu_blocks_lookup(p, p->hash[b]) == b)
            hashed++;
    }
    if (zero != p->nfree) {
        snprintf(err, errlen, "%u unreferenced blocks, %u free", zero, p->nfree);
        return -1;
    }
    if (hashed != p->mcount) {
        snprintf(err, errlen, "cache map has %llu entries, %llu blocks point to themselves",
                 (unsigned long long)p->mcount, (unsigned long long)hashed);
        return -1;
    }
    return 0;
}
