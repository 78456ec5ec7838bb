/* The engine configuration of a catalog GPU and model, the defaults `emulate serve MODEL --gpu GPU`
 * starts from, for the engine model's unit tests (include after harness.h). */
#ifndef ST_TEST_EMU_CONFIG_H
#define ST_TEST_EMU_CONFIG_H
#include "emu/catalog.h"
#include "emu/config.h"

static void emu_config_of(st_emu_config *c, const char *gpu, const char *model)
{
    char err[512];
    st_emu_gpu g;
    st_emu_model m;
    if (st_emu_gpu_find(gpu, &g, err, sizeof err) || st_emu_model_find(model, &m, err, sizeof err))
        fail_msg("%s", err);
    st_emu_config_init(c, &g, &m);
}
#endif
