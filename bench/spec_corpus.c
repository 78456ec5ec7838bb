/* Writes a servetune JSONL log with text for `trace stats --spec` (bench/spec_ngram.sh):
 *
 *   spec_corpus split FILE...        one request per file: the prompt is the file's first half
 *                                    (cut at a line end), the logged completion its second half;
 *                                    the category is the file's extension. Real text continued by
 *                                    real text: what an n-gram proposer finds in a document's own
 *                                    repetitions, with nothing copied on purpose.
 *   spec_corpus chunk BYTES FILE...  the same over consecutive pieces of about BYTES bytes of each
 *                                    file (cut at line ends): prompt the first three quarters,
 *                                    completion the last quarter (chat-sized requests).
 *   spec_corpus repeat N FILE.jsonl  the lines of FILE.jsonl again and again until N lines (for the
 *                                    speed figure on N requests).
 * Output on stdout. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FILE_MAX ((size_t)4 << 20)

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *b = malloc(FILE_MAX + 1);
    size_t n = b ? fread(b, 1, FILE_MAX, f) : 0;
    fclose(f);
    if (!b)
        return NULL;
    b[n] = '\0';
    *len = n;
    return b;
}

/* One line: b[0..n) split at the line end after n * num / den. */
static void emit(const char *b, size_t n, size_t num, size_t den, const char *cat)
{
    size_t cut = n * num / den;
    while (cut < n && b[cut] != '\n')
        cut++;
    if (cut + 1 >= n)
        return;
    cut++;
    json_t *o = json_object();
    json_t *t = json_stringn(b, cut), *c = json_stringn(b + cut, n - cut);
    if (t && c) { /* NULL when not UTF-8 */
        json_object_set_new(o, "text", t);
        json_object_set_new(o, "completion", c);
        json_object_set_new(o, "category", json_string(cat));
        char *s = json_dumps(o, JSON_COMPACT);
        if (s)
            printf("%s\n", s);
        free(s);
    } else {
        json_decref(t);
        json_decref(c);
    }
    json_decref(o);
}

static int split(int argc, char **argv, size_t piece)
{
    for (int i = 0; i < argc; i++) {
        size_t n = 0;
        char *b = slurp(argv[i], &n);
        if (!b || n < 64 || memchr(b, '\0', n)) {
            free(b);
            continue;
        }
        const char *dot = strrchr(argv[i], '.');
        const char *cat = dot ? dot + 1 : "none";
        if (!piece) {
            emit(b, n, 1, 2, cat);
        } else {
            for (size_t at = 0; at < n;) {
                size_t end = at + piece < n ? at + piece : n;
                while (end < n && b[end] != '\n')
                    end++;
                if (end < n)
                    end++;
                emit(b + at, end - at, 3, 4, cat);
                at = end;
            }
        }
        free(b);
    }
    return 0;
}

static int repeat(long n, const char *path)
{
    size_t len = 0;
    char *b = slurp(path, &len);
    if (!b || !len) {
        fprintf(stderr, "spec_corpus: cannot read %s\n", path);
        free(b);
        return 1;
    }
    long done = 0;
    while (done < n) {
        for (char *p = b; *p && done < n;) {
            char *e = strchr(p, '\n');
            size_t l = e ? (size_t)(e - p) : strlen(p);
            if (l) {
                fwrite(p, 1, l, stdout);
                fputc('\n', stdout);
                done++;
            }
            if (!e)
                break;
            p = e + 1;
        }
    }
    free(b);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "split"))
        return split(argc - 2, argv + 2, 0);
    if (argc >= 4 && !strcmp(argv[1], "chunk") && atol(argv[2]) > 0)
        return split(argc - 3, argv + 3, (size_t)atol(argv[2]));
    if (argc == 4 && !strcmp(argv[1], "repeat"))
        return repeat(atol(argv[2]), argv[3]);
    fprintf(stderr, "usage: spec_corpus split FILE... | chunk BYTES FILE... | repeat N FILE.jsonl\n");
    return 2;
}
