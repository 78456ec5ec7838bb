/* Agent trace files (load/agent_file.h). */
#include "load/agent_file.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/file.h"

#define AGENT_HEAD_BYTES ((size_t)64 << 10) /* what detection reads */

st_agent_format st_agent_detect_file(const char *path)
{
    if (!path || !strcmp(path, "-"))
        return ST_AGENT_FMT_NONE;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return ST_AGENT_FMT_NONE;
    char *buf = malloc(AGENT_HEAD_BYTES + 1);
    ssize_t got = 0;
    if (buf) {
        while ((size_t)got < AGENT_HEAD_BYTES) {
            ssize_t r = read(fd, buf + got, AGENT_HEAD_BYTES - (size_t)got);
            if (r <= 0)
                break;
            got += r;
        }
    }
    close(fd);
    st_agent_format f = ST_AGENT_FMT_NONE;
    if (buf && got > 0) {
        buf[got] = 0;
        if ((size_t)got < AGENT_HEAD_BYTES) { /* the whole file */
            f = st_agent_sniff(buf, (size_t)got);
        } else {
            /* the first complete line that is not blank or a comment (a task-graph node, a WEKA
             * trace on one line), else a trace object spread over lines: its keys name it */
            const char *end = strrchr(buf, '\n');
            if (end)
                f = st_agent_sniff(buf, (size_t)(end - buf));
            if (f == ST_AGENT_FMT_NONE && strstr(buf, "\"block_size\"") && strstr(buf, "\"requests\"") &&
                strstr(buf, "\"hash_ids\""))
                f = ST_AGENT_FMT_WEKA;
        }
    }
    free(buf);
    return f;
}

int st_agent_load_file(const char *path, uint64_t salt, st_agent_graph *g, st_workload *w, char *err, size_t errlen)
{
    size_t len;
    char *text = st_read_file(path, ST_AGENT_FILE_MAX, &len, err, errlen);
    if (!text)
        return -1;
    st_agent_graph gg;
    int rc = st_agent_parse(text, len, path, &gg, err, errlen);
    free(text);
    if (rc)
        return -1;
    if (w && st_agent_workload(&gg, salt, w, err, errlen)) {
        st_agent_graph_free(&gg);
        return -1;
    }
    if (g)
        *g = gg;
    else
        st_agent_graph_free(&gg);
    return 0;
}
