/* servetune audit --k8s-manifest with --k8s-image, --k8s-namespace and --k8s-pvc: the options are
 * checked as the spec's cluster.kubernetes values are, so a value kubectl would refuse, or one that
 * would not be YAML, exits 2 with the option named and writes no manifest. Nothing is run. */
#include "harness.h"

#define ST_IT_TMP_PREFIX "/tmp/st_k8s_it."
#include "audit_util.h"

#include <sys/stat.h>

static void write_spec(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("engine:\n  kind: emulator\n  model: Qwen/Qwen3-8B\n  flags: [--gpu, H100]\n"
          "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\n"
          "peak_rate: 10\n"
          "workload: {input_tokens: 256, output_tokens: 16, requests_per_rate: 24, seed: 3}\n"
          "rates: [1]\n"
          "slo: {ttft_p95_ms: 20000, tpot_p95_ms: 2000}\n"
          "configurations:\n  - name: baseline\n  - name: seqs-8\n    add_flags: [--max-num-seqs, '8']\n",
          f);
    fclose(f);
}

static void k8s_options_are_checked(void **state)
{
    (void)state;
    char spec[512], man[512], outp[512];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(man, sizeof man, "%s/audit.yaml", tmp);
    snprintf(outp, sizeof outp, "%s/servetune.out", tmp);
    write_spec(spec);
    static const struct {
        const char *image, *ns, *pvc, *want;
    } bad[] = {
        { "Bad Name", "bench", "out", "--k8s-image: 'Bad Name' is not a name" },
        { "", "bench", "out", "--k8s-image: must not be empty" },
        { "img\"x", "bench", "out", "--k8s-image: 'img\"x' is not a name" },
        { "img\x7f", "bench", "out", "--k8s-image: not a name (a control character or a byte outside ASCII)" },
        { "img\xc3\x28", "bench", "out", "--k8s-image: not a name" }, /* invalid UTF-8 */
        { "reg/servetune:1", "Bad Name", "out", "--k8s-namespace: 'Bad Name' is not a name" },
        { "reg/servetune:1", "Bench", "out", "--k8s-namespace: lower-case letters, digits and '-'" },
        { "reg/servetune:1", "bench", "o'ut", "--k8s-pvc: 'o'ut' is not a name" },
        { "reg/servetune:1", "bench", "Out", "--k8s-pvc: lower-case letters, digits, '-' and '.'" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        unlink(outp);
        const char *args[] = { "audit",           spec,      "--k8s-manifest", man,        "--k8s-image", bad[i].image,
                               "--k8s-namespace", bad[i].ns, "--k8s-pvc",      bad[i].pvc, NULL };
        int rc = run_servetune(args, 30);
        if (rc != 2)
            fail_msg("case %zu: exit %d, expected 2", i, rc);
        if (!file_has(outp, bad[i].want))
            fail_msg("case %zu: the output lacks [%s]", i, bad[i].want);
        struct stat sb;
        if (stat(man, &sb) == 0)
            fail_msg("case %zu: a manifest was written", i);
    }
    /* good values: the manifest, with them */
    const char *args[] = { "audit",           spec,    "--k8s-manifest", man,      "--k8s-image", "reg/servetune:1",
                           "--k8s-namespace", "bench", "--k8s-pvc",      "out.v1", NULL };
    assert_int_equal(run_servetune(args, 30), 0);
    assert_true(file_has(man, "\"reg/servetune:1\""));
    assert_true(file_has(man, "\"bench\""));
    assert_true(file_has(man, "\"out.v1\""));
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(k8s_options_are_checked, setup, teardown),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
