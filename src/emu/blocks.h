/* The paged KV block pool with vLLM V1's prefix cache: full blocks are identified by a hash
 * chained over the parent block's hash and the block's token ids; blocks are reference
 * counted; unreferenced blocks sit in an LRU free queue (evicted from the head, freed blocks
 * appended at the tail) and keep their hash until they are reused. Pure, no I/O.
 *
 * Named and anonymous blocks. A block that a lookup may find (one that is or will be registered
 * with its hash, or is shared) is named: it has a label, an entry (st_emu_block) and its own place
 * in the free queue. A block that no lookup will ever find (a seeded request's unlisted blocks, every
 * block when prefix caching is off) needs neither: what the pool keeps of it is a count. Its owner
 * takes and releases anonymous blocks by number (st_emu_blocks_take_anon, st_emu_blocks_release_anon),
 * and the free queue holds them as runs: blocks released together, in one place of the queue, full
 * (registered unlisted, so that their reuse counts as an eviction) or not. The queue's order is kept
 * by a stamp on every named free block and every run; a take pops whichever is older. Either kind of
 * take pops the same units from the same places, so a pool whose owners hold some blocks anonymously
 * gives the same free counts, evictions and lookups as one in which every block is named: only the
 * labels differ, and nothing reads them but the pool's owners.
 *
 * Memory follows the blocks named, not the pool's size: the free queue starts as one run of all n
 * blocks, never taken, and labels (and the cache map's room) are given out when a take names a
 * block; labels an anonymous take frees from named blocks are kept for the next named one. A pool of
 * ST_EMU_BLOCKS_MAX blocks (a tiny model on a large GPU) costs nothing until a workload fills it. */
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
    uint64_t stamp;            /* while in the free queue: its place there (against the runs') */
    uint32_t ref;              /* references (requests holding it) */
    uint32_t prev, next;       /* the free queue's list of named blocks */
    uint8_t has_hash, in_free; /* has_hash: 1 registered (hash valid), ST_EMU_UNLISTED: registered, not listed */
} st_emu_block;

/* Anonymous free blocks released together, in one place of the free queue. */
typedef struct st_emu_run {
    uint64_t stamp;
    uint32_t count;
    uint32_t full; /* 1: registered full blocks (unlisted), whose reuse is an eviction; 0: never registered */
} st_emu_run;

/* has_hash of a block registered full without its hash (st_emu_blocks_set_unlisted). */
#define ST_EMU_UNLISTED 2

/* One slot of the cache map: the hash and its block together (one memory access per probe). */
typedef struct st_emu_map_slot {
    uint64_t key;
    uint32_t val; /* ST_EMU_NIL = empty slot */
} st_emu_map_slot;

typedef struct st_emu_blocks {
    uint32_t n, block_size;
    uint32_t used;     /* labels given out: [0, used) */
    uint32_t room;     /* per-label entries allocated (>= used) */
    st_emu_block *blk; /* per-label entries: [0, used) */
    uint32_t *spare;   /* labels of no block (an anonymous take freed them), n_spare of them (room for room) */
    uint32_t n_spare;
    uint32_t head, tail; /* the free queue's named blocks, in order (ST_EMU_NIL: none) */
    st_emu_run *runs;    /* and its runs, in order: runs[run_head, run_head + n_runs) */
    uint32_t run_head, n_runs, cap_runs;
    uint64_t stamp; /* the next place in the free queue */
    uint32_t nfree; /* free blocks: the named ones and the runs' */
    uint32_t anon;  /* anonymous blocks held (taken and not released) */
    int failed;     /* sticky: a release could not record its run (out of memory); the pool is unusable */
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
/* Pops n blocks from the free queue head (evicting their cached hashes), ref = 1 each, named (their
 * labels into out). -1 when fewer than n are free, -2 out of memory (nothing taken either way). */
int st_emu_blocks_take(st_emu_blocks *p, uint32_t n, uint32_t *out);
/* The same n blocks taken anonymously: counted, not named (the evictions are the same). -1 when fewer
 * than n are free (nothing taken). */
int st_emu_blocks_take_anon(st_emu_blocks *p, uint32_t n);
/* Names n of the anonymous blocks held (the holder is about to register them): labels into out, ref 1,
 * no hash. 0, or -2 out of memory (nothing changed). */
int st_emu_blocks_name(st_emu_blocks *p, uint32_t n, uint32_t *out);
/* Makes room so that taking or naming n blocks allocates nothing. 0, or -1 out of memory. */
int st_emu_blocks_reserve(st_emu_blocks *p, uint32_t n);
/* Drops one reference of each block, the last first (a request's tail blocks are queued
 * first so they are evicted first); unreferenced blocks go to the free queue tail. */
void st_emu_blocks_release(st_emu_blocks *p, const uint32_t *blocks, uint32_t n);
/* Releases anonymous blocks held, as a request's tail releases them (the last first): `open` blocks
 * never registered, then `full` registered ones (unlisted), to the free queue tail. Out of memory
 * sets p->failed. */
void st_emu_blocks_release_anon(st_emu_blocks *p, uint32_t open, uint32_t full);
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
