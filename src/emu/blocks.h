/* The paged KV block pool with vLLM V1's prefix cache: full blocks are identified by a hash
 * chained over the parent block's hash and the block's token ids; blocks are reference
 * counted; unreferenced blocks sit in an LRU free queue (evicted from the head, freed blocks
 * appended at the tail) and keep their hash until they are reused. Pure, no I/O.
 *
 * Memory follows the blocks used, not the pool's size: the free queue starts as blocks 0..n-1
 * in order, and since freed blocks join at the tail, the blocks never taken are always its
 * head, in order. They are kept as a range [used, n) and get their per-block entries (and the
 * cache map its room) when first taken, so a pool of ST_EMU_BLOCKS_MAX blocks (a tiny model on
 * a large GPU) costs nothing until a workload fills it. */
#ifndef ST_EMU_BLOCKS_H
#define ST_EMU_BLOCKS_H
#include <stddef.h>
#include <stdint.h>

#define ST_EMU_NIL UINT32_MAX
/* The most blocks a pool holds (block ids are 32-bit, ST_EMU_NIL excluded). */
#define ST_EMU_BLOCKS_MAX (UINT32_MAX - 1u)

/* One block's entry: everything a take, a release or a registration touches, in one place (one
 * cache line or two at most for a block, rather than one per field). */
typedef struct st_emu_block {
    uint64_t hash;             /* valid when has_hash */
    uint32_t ref;              /* references (requests holding it) */
    uint32_t prev, next;       /* free queue links of the blocks taken before (after the range) */
    uint8_t has_hash, in_free; /* has_hash: 1 registered (hash valid), ST_EMU_UNLISTED: registered, not listed */
} st_emu_block;

/* has_hash of a block registered full without its hash (st_emu_blocks_set_unlisted). */
#define ST_EMU_UNLISTED 2

/* One slot of the cache map: the hash and its block together (one memory access per probe). */
typedef struct st_emu_map_slot {
    uint64_t key;
    uint32_t val; /* ST_EMU_NIL = empty slot */
} st_emu_map_slot;

typedef struct st_emu_blocks {
    uint32_t n, block_size;
    uint32_t used;       /* blocks [used, n) were never taken: the free queue's head, in order */
    uint32_t room;       /* per-block entries allocated (>= used) */
    st_emu_block *blk;   /* per-block entries: [0, used) */
    uint32_t head, tail; /* the free queue list's ends (ST_EMU_NIL: empty) */
    uint32_t nfree;      /* the range and the list */
    /* hash -> block (open addressing, linear probing, backward-shift deletion) */
    st_emu_map_slot *map;
    uint64_t mcap, mcount;
    uint64_t evictions;
} st_emu_blocks;

/* n in [1, ST_EMU_BLOCKS_MAX]. 0, or -1 (bad size, out of memory). */
int st_emu_blocks_init(st_emu_blocks *p, uint32_t n, uint32_t block_size);
void st_emu_blocks_free(st_emu_blocks *p);
/* Hash of one full block: parent hash (0 for the first block) and its token ids. */
uint64_t st_emu_block_hash(uint64_t parent, const uint32_t *ids, uint32_t n);
/* References held on block b (0 for a block never taken). */
uint32_t st_emu_blocks_ref(const st_emu_blocks *p, uint32_t b);
/* Whether block b holds a hash (it was registered full and not evicted since). */
int st_emu_blocks_has_hash(const st_emu_blocks *p, uint32_t b);
/* Block holding this hash, or ST_EMU_NIL. */
uint32_t st_emu_blocks_lookup(const st_emu_blocks *p, uint64_t h);
/* Takes a prefix-cache hit (a block taken before): removes it from the free queue if
 * unreferenced; ref++. */
void st_emu_blocks_touch(st_emu_blocks *p, uint32_t b);
/* Pops n blocks from the free queue head (evicting their cached hashes), ref = 1 each.
 * -1 when fewer than n are free, -2 out of memory (nothing taken either way). */
int st_emu_blocks_take(st_emu_blocks *p, uint32_t n, uint32_t *out);
/* Makes room so that taking n blocks allocates nothing. 0, or -1 out of memory. */
int st_emu_blocks_reserve(st_emu_blocks *p, uint32_t n);
/* Drops one reference of each block, the last first (a request's tail blocks are queued
 * first so they are evicted first); unreferenced blocks go to the free queue tail. */
void st_emu_blocks_release(st_emu_blocks *p, const uint32_t *blocks, uint32_t n);
/* Marks block b as full with hash h and registers it in the cache (if h is not already
 * cached by another block); an unlisted block (st_emu_blocks_set_unlisted) gets listed. */
void st_emu_blocks_set_hash(st_emu_blocks *p, uint32_t b, uint64_t h);
/* Fetches block b's entry and the cache-map slot of hash h ahead of a st_emu_blocks_set_hash(p, b, h)
 * (several registrations in a row then overlap their waits for memory). Changes no state. */
void st_emu_blocks_prefetch(const st_emu_blocks *p, uint32_t b, uint64_t h);
/* Marks block b as full and cached without computing its hash, for a block no lookup will look
 * for until st_emu_blocks_set_hash lists it: it counts as a cached block (its reuse is an eviction)
 * but is not in the map. A block already registered is left as it is. */
void st_emu_blocks_set_unlisted(st_emu_blocks *p, uint32_t b);
/* Forgets every cached hash. Like vLLM, refuses (-1) while any block is referenced. */
int st_emu_blocks_reset_cache(st_emu_blocks *p);
/* Checks internal consistency (free queue vs reference counts, map vs blocks);
 * 0 or -1 with a reason. Used by tests. */
int st_emu_blocks_check(const st_emu_blocks *p, char *err, size_t errlen);

#endif
