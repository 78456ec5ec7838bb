/* The layer rule (docs/architecture.md): scripts/check-layers passes on this tree and fails,
 * naming the file and line, on a tree with an include that points up a layer. */
#include "harness.h"

#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs scripts/check-layers [root] with its output in out; returns the exit status. */
static int check(const char *root, char *out, size_t cap)
{
    char *argv[] = { "scripts/check-layers", (char *)root, NULL };
    return st_test_capture(argv, out, cap);
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_tree_passes(void **state)
{
    (void)state;
    char out[4096];
    int rc = check(".", out, sizeof out);
    if (rc != 0)
        fail_msg("check-layers on this tree: exit %d\n%s", rc, out);
}

static void test_upward_include_fails(void **state)
{
    (void)state;
    char root[] = "/tmp/st_layers.XXXXXX", p[512], out[4096];
    assert_non_null(mkdtemp(root));
    const char *dirs[] = { "src",     "src/core",   "src/load", "src/audit",
                           "src/emu", "src/engine", "src/plan", "src/cluster" };
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        snprintf(p, sizeof p, "%s/%s", root, dirs[i]);
        assert_int_equal(mkdir(p, 0755), 0);
    }
    snprintf(p, sizeof p, "%s/src/audit/a.h", root);
    put(p, "#include \"load/x.h\"\n#include \"core/y.h\"\n");
    snprintf(p, sizeof p, "%s/src/core/c.c", root);
    put(p, "#include \"core/y.h\"\n");
    assert_int_equal(check(root, out, sizeof out), 0);

    /* load/ reaching up into audit/ */
    snprintf(p, sizeof p, "%s/src/load/bad.c", root);
    put(p, "#include <stdio.h>\n\n#include \"audit/spec.h\"\n");
    assert_int_equal(check(root, out, sizeof out), 1);
    assert_non_null(strstr(out, "src/load/bad.c:3: load/ includes audit/"));

    /* emu/ and engine/ are one layer, but emu never includes engine */
    put(p, "#include \"core/y.h\"\n");
    snprintf(p, sizeof p, "%s/src/emu/e.c", root);
    put(p, "#include \"engine/api.h\"\n");
    assert_int_equal(check(root, out, sizeof out), 1);
    assert_non_null(strstr(out, "src/emu/e.c:1: emu/ includes engine/"));
    put(p, "#include \"core/y.h\"\n");

    /* audit/ measures; planning (plan/) and the cluster (cluster/) sit above it */
    snprintf(p, sizeof p, "%s/src/audit/b.c", root);
    put(p, "#include \"plan/cost.h\"\n");
    assert_int_equal(check(root, out, sizeof out), 1);
    assert_non_null(strstr(out, "src/audit/b.c:1: audit/ includes plan/"));
    put(p, "#include \"audit/spec.h\"\n");

    /* plan/ and cluster/ are one layer and never include each other */
    snprintf(p, sizeof p, "%s/src/plan/p.c", root);
    put(p, "#include \"audit/spec.h\"\n#include \"cluster/shard.h\"\n");
    assert_int_equal(check(root, out, sizeof out), 1);
    assert_non_null(strstr(out, "src/plan/p.c:2: plan/ includes cluster/"));

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", root);
    (void)!system(cmd);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_tree_passes),
        cmocka_unit_test(test_upward_include_fails),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
