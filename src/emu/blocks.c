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

/* Per-label entries (and the spare labels' room) for labels [0, want): grown by doubling up to n. 0, or -1 out of memory. */
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
    uint32_t *sp = realloc(p->spare, r * sizeof *p->spare);
    if (!sp)
        return -1;
    p->spare = sp;
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
    p->runs = malloc(16 * sizeof *p->runs);
    if (!p->runs) {
        st_emu_blocks_free(p);
        return -1;
    }
    p->cap_runs = 16;
    p->runs[0] = (st_emu_run){ .stamp = 0, .count = n, .full = 0 }; /* the blocks never taken */
    p->n_runs = 1;
    p->stamp = 1;
    if (ensure_room(p, n < 1024 ? n : 1024) < 0 || map_reserve(p, p->room) < 0) {
        st_emu_blocks_free(p);
        return -1;
    }
    return 0;
}

/* Room for n more labels (the spare ones first), their entries and their cache-map slots. 0, or -1. */
static int room_for_labels(st_emu_blocks *p, uint32_t n)
{
    uint64_t virgin = p->n - p->used, want = n > p->n_spare ? n - p->n_spare : 0, fresh = want < virgin ? want : virgin;
    if (ensure_room(p, (uint64_t)p->used + fresh) < 0 || map_reserve(p, (uint64_t)p->used + fresh) < 0)
        return -1;
    return 0;
}

int st_emu_blocks_reserve(st_emu_blocks *p, uint32_t n)
{
    if (n > p->nfree && n > p->anon)
        return 0; /* take (and name) refuse it anyway */
    return room_for_labels(p, n);
}

void st_emu_blocks_free(st_emu_blocks *p)
{
    free(p->blk);
    free(p->spare);
    free(p->runs);
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
    x->stamp = p->stamp++;
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

/* Whether the free queue's head is a run (else the named block p->head; nfree > 0). */
static int head_is_run(const st_emu_blocks *p)
{
    return p->n_runs && (p->head == ST_EMU_NIL || p->runs[p->run_head].stamp < p->blk[p->head].stamp);
}

/* Takes k of the head run's blocks (k <= its count): their evictions; the run goes when emptied. */
static void run_pop(st_emu_blocks *p, uint32_t k)
{
    st_emu_run *r = &p->runs[p->run_head];
    r->count -= k;
    if (r->full)
        p->evictions += k;
    p->nfree -= k;
    if (r->count == 0) {
        p->run_head++;
        if (--p->n_runs == 0)
            p->run_head = 0;
    }
}

/* Pops the named block at the head of the free queue, its cached hash evicted. */
static uint32_t named_pop(st_emu_blocks *p)
{
    uint32_t b = p->head;
    fq_remove(p, b);
    st_emu_block *x = &p->blk[b];
    if (x->has_hash) {
        if (x->has_hash != ST_EMU_UNLISTED)
            map_del(p, x->hash, b);
        x->has_hash = 0;
        p->evictions++;
    }
    return b;
}

/* A label for a block a take or st_emu_blocks_name names: a spare one, else the next never given
 * (room_for_labels before); its entry afresh, ref 1. */
static uint32_t new_label(st_emu_blocks *p)
{
    uint32_t b = p->n_spare ? p->spare[--p->n_spare] : p->used++;
    p->blk[b] = (st_emu_block){ .ref = 1, .prev = ST_EMU_NIL, .next = ST_EMU_NIL };
    return b;
}

/* The cache-map slots of the listed blocks among the next n named ones a take evicts, fetched ahead
 * so that their deletions overlap their waits for memory. Changes no state. */
static void prefetch_victims(const st_emu_blocks *p, uint32_t n)
{
    if (n < 2)
        return; /* none, or one (prefetched by the take before) */
    uint32_t b = p->head;
    for (uint32_t i = 0; i < n && b != ST_EMU_NIL; i++, b = p->blk[b].next)
        if (p->blk[b].has_hash == 1)
            __builtin_prefetch(&p->map[slot_of(p, p->blk[b].hash)]);
}

int st_emu_blocks_take(st_emu_blocks *p, uint32_t n, uint32_t *out)
{
    if (n > p->nfree)
        return -1;
    if (room_for_labels(p, n) < 0)
        return -2;
    prefetch_victims(p, n);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t b;
        if (head_is_run(p)) {
            run_pop(p, 1);
            b = new_label(p);
        } else {
            b = named_pop(p);
            p->blk[b].ref = 1;
        }
        out[i] = b;
    }
    /* The next take evicts the free queue's head, whose entry fq_remove just wrote: its cache-map
     * slot and the entry after it are fetched ahead, so that take waits less for memory (a
     * prefetch changes no state). */
    if (p->head != ST_EMU_NIL) {
        const st_emu_block *h = &p->blk[p->head];
        if (h->has_hash == 1)
            __builtin_prefetch(&p->map[slot_of(p, h->hash)]);
        if (h->next != ST_EMU_NIL)
            __builtin_prefetch(&p->blk[h->next]);
    }
    return 0;
}

int st_emu_blocks_take_anon(st_emu_blocks *p, uint32_t n)
{
    if (n > p->nfree)
        return -1;
    p->anon += n;
    while (n > 0) {
        if (head_is_run(p)) {
            uint32_t c = p->runs[p->run_head].count, k = n < c ? n : c;
            run_pop(p, k);
            n -= k;
        } else {
            p->spare[p->n_spare++] = named_pop(p); /* (spare's room is room >= used) */
            n--;
        }
    }
    return 0;
}

int st_emu_blocks_name(st_emu_blocks *p, uint32_t n, uint32_t *out)
{
    if (n > p->anon)
        n = p->anon;
    if (room_for_labels(p, n) < 0)
        return -2;
    for (uint32_t i = 0; i < n; i++)
        out[i] = new_label(p);
    p->anon -= n;
    return 0;
}

/* Appends a run of k anonymous blocks at the free queue's tail (joined to the last run when nothing
 * was queued after it and it is of the same kind). */
static void run_append(st_emu_blocks *p, uint32_t k, uint32_t full)
{
    if (k == 0)
        return;
    p->nfree += k;
    if (p->n_runs) {
        st_emu_run *t = &p->runs[p->run_head + p->n_runs - 1];
        if (t->full == full && t->stamp + 1 == p->stamp) {
            t->count += k;
            return;
        }
    }
    if (p->run_head + p->n_runs == p->cap_runs) { /* at the array's end: move down, or grow */
        if (p->run_head >= p->cap_runs / 2) {
            memmove(p->runs, p->runs + p->run_head, (size_t)p->n_runs * sizeof *p->runs);
            p->run_head = 0;
        } else {
            st_emu_run *r = realloc(p->runs, (size_t)p->cap_runs * 2 * sizeof *r);
            if (!r) {
                p->failed = 1;
                p->nfree -= k;
                return;
            }
            p->runs = r;
            p->cap_runs *= 2;
        }
    }
    p->runs[p->run_head + p->n_runs++] = (st_emu_run){ .stamp = p->stamp++, .count = k, .full = full };
}

void st_emu_blocks_release_anon(st_emu_blocks *p, uint32_t open, uint32_t full)
{
    p->anon -= open + full;
    run_append(p, open, 0);
    run_append(p, full, 1);
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
    for (uint32_t i = 0; i < p->n_runs; i++)
        p->runs[p->run_head + i].full = 0;
    for (uint64_t i = 0; i < p->mcap; i++)
        p->map[i].val = ST_EMU_NIL;
    p->mcount = 0;
    return 0;
}

int st_emu_blocks_check(const st_emu_blocks *p, char *err, size_t errlen)
{
    if (p->failed) {
        snprintf(err, errlen, "a release could not record its blocks (out of memory)");
        return -1;
    }
    uint32_t cnt = 0, prev = ST_EMU_NIL;
    uint64_t last = 0, units = 0;
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
        if (cnt > 1 && p->blk[b].stamp <= last) {
            snprintf(err, errlen, "free queue out of order at block %u", b);
            return -1;
        }
        last = p->blk[b].stamp;
        prev = b;
    }
    for (uint32_t i = 0; i < p->n_runs; i++) {
        const st_emu_run *r = &p->runs[p->run_head + i];
        if (r->count == 0 || (i > 0 && r->stamp <= r[-1].stamp) || r->stamp >= p->stamp) {
            snprintf(err, errlen, "run %u of the free queue: %u blocks, place %llu", i, r->count,
                     (unsigned long long)r->stamp);
            return -1;
        }
        units += r->count;
    }
    if (p->used > p->n || prev != p->tail || cnt + units != p->nfree || p->n_spare > p->used) {
        snprintf(err, errlen, "free queue: %u named and %llu in runs, counter %u", cnt, (unsigned long long)units,
                 p->nfree);
        return -1;
    }
    for (uint32_t k = 0; k < p->n_spare; k++)
        if (p->spare[k] >= p->used || p->blk[p->spare[k]].ref || p->blk[p->spare[k]].in_free) {
            snprintf(err, errlen, "spare label %u is held or free", p->spare[k]);
            return -1;
        }
    uint32_t idle = 0, held = 0; /* labels neither held nor free: the spare ones */
    uint64_t hashed = 0;
    for (uint32_t b = 0; b < p->used; b++) {
        if (p->blk[b].ref)
            held++;
        else if (!p->blk[b].in_free)
            idle++;
        if (p->blk[b].has_hash == 1 && st_emu_blocks_lookup(p, p->blk[b].hash) == b)
            hashed++;
    }
    if (idle != p->n_spare) {
        snprintf(err, errlen, "%u labels unreferenced but not free, %u spare (leaked)", idle, p->n_spare);
        return -1;
    }
    if ((uint64_t)held + cnt + units + p->anon != p->n) {
        snprintf(err, errlen, "%u held, %u free named, %llu free in runs, %u anonymous held: not the pool's %u", held,
                 cnt, (unsigned long long)units, p->anon, p->n);
        return -1;
    }
    if (hashed != p->mcount) {
        snprintf(err, errlen, "cache map has %llu entries, %llu blocks point to themselves",
                 (unsigned long long)p->mcount, (unsigned long long)hashed);
        return -1;
    }
    return 0;
}
