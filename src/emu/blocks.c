#include "emu/blocks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

uint64_t st_emu_block_hash(uint64_t parent, const uint32_t *ids, uint32_t n)
{
    /* two 32-bit ids per mixing round (half the rounds of one id each); the round number keeps
     * the order, and an odd last id gets a round of its own */
    uint64_t h = st_mix64(parent ^ 0x9e3779b97f4a7c15ULL);
    uint32_t i = 0;
    for (; i + 1 < n; i += 2)
        h = st_mix64(h ^ (((uint64_t)ids[i + 1] << 32 | ids[i]) + 0x632be59bd9b4e019ULL * (i + 1)));
    if (i < n)
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
    void *a = realloc(p->blk, r * sizeof *p->blk);
    if (!a)
        return -1;
    p->blk = a;
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
    st_emu_map_slot *m = malloc(cap * sizeof *m);
    if (!m)
        return -1;
    for (uint64_t i = 0; i < cap; i++)
        m[i] = (st_emu_map_slot){ 0, ST_EMU_NIL };
    for (uint64_t i = 0; i < p->mcap; i++) { /* rehash */
        if (p->map[i].val == ST_EMU_NIL)
            continue;
        uint64_t s = slot_of_cap(cap, p->map[i].key);
        while (m[s].val != ST_EMU_NIL)
            s = (s + 1) & (cap - 1);
        m[s] = p->map[i];
    }
    free(p->map);
    p->map = m;
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
    free(p->blk);
    free(p->map);
    memset(p, 0, sizeof *p);
}

static uint64_t slot_of_cap(uint64_t cap, uint64_t h) { return st_mix64(h) & (cap - 1); }
static uint64_t slot_of(const st_emu_blocks *p, uint64_t h) { return slot_of_cap(p->mcap, h); }
uint32_t st_emu_blocks_ref(const st_emu_blocks *p, uint32_t b) { return b < p->used ? p->blk[b].ref : 0; }
int st_emu_blocks_has_hash(const st_emu_blocks *p, uint32_t b) { return b < p->used && p->blk[b].has_hash; }

uint32_t st_emu_blocks_lookup(const st_emu_blocks *p, uint64_t h)
{
    for (uint64_t s = slot_of(p, h), k = 0; k < p->mcap; k++, s = (s + 1) & (p->mcap - 1)) {
        if (p->map[s].val == ST_EMU_NIL)
            return ST_EMU_NIL;
        if (p->map[s].key == h)
            return p->map[s].val;
    }
    return ST_EMU_NIL;
}

/* The map has room: map_reserve for every block taken (st_emu_blocks_take). */
static void map_put(st_emu_blocks *p, uint64_t h, uint32_t b)
{
    uint64_t s = slot_of(p, h);
    while (p->map[s].val != ST_EMU_NIL) {
        if (p->map[s].key == h)
            return; /* already cached by another block: keep the first */
        s = (s + 1) & (p->mcap - 1);
    }
    p->map[s] = (st_emu_map_slot){ h, b };
    p->mcount++;
}

static void map_del(st_emu_blocks *p, uint64_t h, uint32_t b)
{
    st_emu_map_slot *m = p->map;
    uint64_t mask = p->mcap - 1, s = slot_of(p, h);
    while (m[s].val != ST_EMU_NIL && !(m[s].key == h && m[s].val == b))
        s = (s + 1) & mask;
    if (m[s].val == ST_EMU_NIL)
        return;
    /* backward-shift deletion */
    uint64_t hole = s, j = s;
    for (;;) {
        j = (j + 1) & mask;
        if (m[j].val == ST_EMU_NIL)
            break;
        uint64_t home = slot_of(p, m[j].key);
        /* can the entry at j move to hole? yes if home is not in (hole, j] cyclically */
        int in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!in_range) {
            m[hole] = m[j];
            hole = j;
        }
    }
    m[hole].val = ST_EMU_NIL;
    p->mcount--;
}

static void fq_remove(st_emu_blocks *p, uint32_t b)
{
    st_emu_block *x = &p->blk[b];
    uint32_t pv = x->prev, nx = x->next;
    if (pv != ST_EMU_NIL)
        p->blk[pv].next = nx;
    else
        p->head = nx;
    if (nx != ST_EMU_NIL)
        p->blk[nx].prev = pv;
    else
        p->tail = pv;
    x->prev = x->next = ST_EMU_NIL;
    x->in_free = 0;
    p->nfree--;
}

static void fq_append(st_emu_blocks *p, uint32_t b)
{
    st_emu_block *x = &p->blk[b];
    x->prev = p->tail;
    x->next = ST_EMU_NIL;
    if (p->tail != ST_EMU_NIL)
        p->blk[p->tail].next = b;
    else
        p->head = b;
    p->tail = b;
    x->in_free = 1;
    p->nfree++;
}

void st_emu_blocks_touch(st_emu_blocks *p, uint32_t b)
{
    if (b >= p->used)
        return; /* never taken: holds no hash, nothing looks it up */
    if (p->blk[b].ref == 0 && p->blk[b].in_free)
        fq_remove(p, b);
    p->blk[b].ref++;
}

void st_emu_blocks_prefetch(const st_emu_blocks *p, uint32_t b, uint64_t h)
{
    if (b < p->used)
        __builtin_prefetch(&p->blk[b]);
    if (p->mcap)
        __builtin_prefetch(&p->map[slot_of(p, h)]);
}

/* The cache-map slots of the listed blocks among the next n a take evicts (the free queue's head
 * after the range of blocks never taken), fetched ahead so that their deletions overlap their
 * waits for memory. Changes no state. */
static void prefetch_victims(const st_emu_blocks *p, uint32_t n)
{
    uint32_t virgin = p->n - p->used;
    if (n <= virgin + 1)
        return; /* none, or one (prefetched by the take before) */
    uint32_t b = p->head;
    for (uint32_t i = virgin; i < n && b != ST_EMU_NIL; i++, b = p->blk[b].next)
        if (p->blk[b].has_hash == 1)
            __builtin_prefetch(&p->map[slot_of(p, p->blk[b].hash)]);
}

int st_emu_blocks_take(st_emu_blocks *p, uint32_t n, uint32_t *out)
{
    if (n > p->nfree)
        return -1;
    if (st_emu_blocks_reserve(p, n) < 0)
        return -2;
    prefetch_victims(p, n);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t b;
        if (p->used < p->n) { /* the range of blocks never taken comes first */
            b = p->used++;
            p->blk[b] = (st_emu_block){ .prev = ST_EMU_NIL, .next = ST_EMU_NIL };
            p->nfree--;
        } else {
            b = p->head;
            fq_remove(p, b);
        }
        st_emu_block *x = &p->blk[b];
        if (x->has_hash) {
            if (x->has_hash != ST_EMU_UNLISTED)
                map_del(p, x->hash, b);
            x->has_hash = 0;
            p->evictions++;
        }
        x->ref = 1;
        out[i] = b;
    }
    /* The next take evicts the free queue's head, whose entry fq_remove just wrote: its cache-map
     * slot and the entry after it are fetched ahead, so that take waits less for memory (a
     * prefetch changes no state). */
    if (p->used >= p->n && p->head != ST_EMU_NIL) {
        const st_emu_block *h = &p->blk[p->head];
        if (h->has_hash == 1)
            __builtin_prefetch(&p->map[slot_of(p, h->hash)]);
        if (h->next != ST_EMU_NIL)
            __builtin_prefetch(&p->blk[h->next]);
    }
    return 0;
}

void st_emu_blocks_release(st_emu_blocks *p, const uint32_t *blocks, uint32_t n)
{
    for (uint32_t i = n; i-- > 0;) {
        uint32_t b = blocks[i];
        if (b >= p->used || p->blk[b].ref == 0)
            continue; /* would be a double free: ignored here, caught by st_emu_blocks_check */
        if (--p->blk[b].ref == 0)
            fq_append(p, b);
    }
}

void st_emu_blocks_set_hash(st_emu_blocks *p, uint32_t b, uint64_t h)
{
    if (b >= p->used || p->blk[b].has_hash == 1)
        return;
    p->blk[b].has_hash = 1;
    p->blk[b].hash = h;
    map_put(p, h, b);
}

void st_emu_blocks_set_unlisted(st_emu_blocks *p, uint32_t b)
{
    if (b < p->used && !p->blk[b].has_hash)
        p->blk[b].has_hash = ST_EMU_UNLISTED;
}

int st_emu_blocks_reset_cache(st_emu_blocks *p)
{
    if (p->nfree != p->n)
        return -1;
    for (uint32_t b = 0; b < p->used; b++)
        p->blk[b].has_hash = 0;
    for (uint64_t i = 0; i < p->mcap; i++)
        p->map[i].val = ST_EMU_NIL;
    p->mcount = 0;
    return 0;
}

int st_emu_blocks_check(const st_emu_blocks *p, char *err, size_t errlen)
{
    uint32_t cnt = 0, prev = ST_EMU_NIL;
    for (uint32_t b = p->head; b != ST_EMU_NIL; b = p->blk[b].next) {
        if (++cnt > p->n) {
            snprintf(err, errlen, "free queue has a cycle");
            return -1;
        }
        if (p->blk[b].prev != prev) {
            snprintf(err, errlen, "free queue link broken at block %u", b);
            return -1;
        }
        if (p->blk[b].ref != 0 || !p->blk[b].in_free) {
            snprintf(err, errlen, "block %u in the free queue with ref %u", b, p->blk[b].ref);
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
        if (p->blk[b].ref == 0)
            zero++;
        if (p->blk[b].ref == 0 && !p->blk[b].in_free) {
            snprintf(err, errlen, "block %u unreferenced but not free (leaked)", b);
            return -1;
        }
        if (p->blk[b].has_hash == 1 && st_emu_blocks_lookup(p, p->blk[b].hash) == b)
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
