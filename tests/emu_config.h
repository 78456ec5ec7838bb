/* The engine configuration of a catalog GPU and model, the defaults `emulate serve MODEL --gpu GPU`
 * starts from, for the engine model's unit tests (include after harness.h). */
#ifndef ST_TEST_EMU_CONFIG_H
#define ST_TEST_EMU_CONFIG_H
#include "emu/catalog.h"
#include "emu/config.h"
#include "emu/engine.h"

static inline void emu_config_of(st_emu_config *c, const char *gpu, const char *model)
{
    char err[512];
    st_emu_gpu g;
    st_emu_model m;
    if (st_emu_gpu_find(gpu, &g, err, sizeof err) || st_emu_model_find(model, &m, err, sizeof err))
        fail_msg("%s", err);
    st_emu_config_init(c, &g, &m);
}
/* A Llama-3-8B on an RTX 4090 whose KV cache holds `blocks` blocks of 16 tokens (within one), at most
 * `seqs` sequences and `budget` tokens a step, max_model_len 2,048, without the API server's model: the
 * scheduler's own tests. */
static inline void emu_small_config(st_emu_config *c, uint32_t blocks, uint32_t seqs, uint32_t budget)
{
    char err[512];
    st_emu_gpu g;
    st_emu_model m;
    assert_int_equal(st_emu_gpu_find("RTX4090", &g, err, sizeof err), 0);
    assert_int_equal(st_emu_model_find("meta-llama/Meta-Llama-3-8B", &m, err, sizeof err), 0);
    st_emu_config_init(c, &g, &m);
    c->no_frontend = 1; /* the scheduler alone: requests reach it when added */
    c->max_model_len = 2048;
    c->max_num_seqs = seqs;
    c->max_num_batched_tokens = budget;
    st_emu_config probe = *c;
    st_emu_memory mem;
    assert_int_equal(st_emu_memory_plan(&probe, &mem, err, sizeof err), 0);
    double want = (blocks + 0.5) * 16 * mem.kv_bytes_per_token;
    c->gpu_memory_utilization =
        (mem.weight_bytes + mem.activation_bytes + mem.non_torch_bytes + want) / mem.total_bytes;
}
#endif
