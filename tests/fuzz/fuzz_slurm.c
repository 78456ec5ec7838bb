/* libFuzzer target: what servetune reads back from Slurm (sbatch --parsable's job id, squeue's
 * "%F|%K|%T" lines), and the shell quoting of what it writes for Slurm (every word must come out
 * single-quoted with nothing left unquoted). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/jobs.h"
#include "cluster/k8s.h"
#include "cluster/slurm.h"
#include "core/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char id[ST_SLURM_JOBID_MAX];
    if (st_slurm_parse_jobid(text, id, sizeof id) == 0 && strspn(id, "0123456789") != strlen(id))
        abort();
    st_slurm_task *t;
    int n;
    if (st_slurm_parse_queue(text, &t, &n) == 0) {
        for (int i = 0; i < n; i++)
            if (strspn(t[i].job, "0123456789") != strlen(t[i].job) || t[i].task < -1)
                abort();
        free(t);
    }
    st_buf b;
    st_buf_init(&b, 8 * size + 16);
    if (st_buf_shell_quote(&b, text) == 0 && st_shell_plain(text)) {
        if (strcmp(b.data, text)) /* a plain word goes out as it is */
            abort();
    } else if (st_buf_error(&b) == ST_BUF_OK) {
        /* outside the quotes only the escaped-quote sequence '\'' may appear */
        int in = 0;
        for (size_t i = 0; i < b.len; i++) {
            char c = b.data[i];
            if (in) {
                in = c != '\'';
                continue;
            }
            if (c == '\'')
                in = 1;
            else if (c == '\\' && i + 1 < b.len && b.data[i + 1] == '\'')
                i++;
            else
                abort();
        }
        if (in || b.len < 2)
            abort();
    }
    st_buf_free(&b);
    char why[256];
    (void)st_slurm_dir_ok(text, why, sizeof why);
    free(text);
    return 0;
}
