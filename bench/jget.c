/* Reads figures out of a `servetune bench --json` file for bench/run.sh (so the script needs
 * neither jq nor python):
 *   jget FILE a.b.c        prints the value at that path (numbers as %.6g, strings raw; a number
 *                          indexes an array: configurations.0.name)
 *   jget FILE --first-tokens   prints "id first_token_ns" for every ok record
 *   jget FILE --overlap-events prints "events seconds events_per_s" for the window in which
 *                              every stream was open (last first token to first end) */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: jget FILE PATH | jget FILE --first-tokens\n");
        return 2;
    }
    json_error_t je;
    json_t *root = json_load_file(argv[1], 0, &je);
    if (!root) {
        fprintf(stderr, "jget: %s: %s\n", argv[1], je.text);
        return 1;
    }
    if (!strcmp(argv[2], "--overlap-events")) {
        size_t i;
        json_t *r;
        long long lo = 0, hi = 0;
        int any = 0;
        json_array_foreach(json_object_get(root, "records"), i, r)
        {
            json_t *ft = json_object_get(r, "first_token_ns"), *en = json_object_get(r, "end_ns");
            if (!json_is_integer(ft) || !json_is_integer(en))
                continue;
            long long a = json_integer_value(ft), b = json_integer_value(en);
            if (!any || a > lo)
                lo = a;
            if (!any || b < hi)
                hi = b;
            any = 1;
        }
        long long n = 0;
        json_array_foreach(json_object_get(root, "records"), i, r)
        {
            size_t k;
            json_t *t;
            json_array_foreach(json_object_get(r, "event_times_ns"), k, t)
            {
                long long v = json_integer_value(t);
                n += v >= lo && v < hi;
            }
        }
        double secs = any && hi > lo ? (double)(hi - lo) / 1e9 : 0;
        printf("%lld %.3f %.0f\n", n, secs, secs > 0 ? (double)n / secs : 0.0);
        json_decref(root);
        return 0;
    }
    if (!strcmp(argv[2], "--first-tokens")) {
        size_t i;
        json_t *r;
        json_array_foreach(json_object_get(root, "records"), i, r)
        {
            json_t *ft = json_object_get(r, "first_token_ns");
            const char *st = json_string_value(json_object_get(r, "status"));
            if (st && !strcmp(st, "ok") && json_is_integer(ft))
                printf("%lld %lld\n", (long long)json_integer_value(json_object_get(r, "id")),
                       (long long)json_integer_value(ft));
        }
        json_decref(root);
        return 0;
    }
    json_t *v = root;
    char path[512];
    snprintf(path, sizeof path, "%s", argv[2]);
    /* a number indexes an array: configurations.0.name */
    for (char *k = strtok(path, "."); k && v; k = strtok(NULL, "."))
        v = json_is_array(v) ? json_array_get(v, strtoul(k, NULL, 10)) : json_object_get(v, k);
    if (json_is_integer(v))
        printf("%lld\n", (long long)json_integer_value(v));
    else if (json_is_number(v))
        printf("%.6g\n", json_number_value(v));
    else if (json_is_string(v))
        printf("%s\n", json_string_value(v));
    else if (json_is_boolean(v))
        printf("%s\n", json_is_true(v) ? "true" : "false");
    else
        printf("null\n");
    json_decref(root);
    return 0;
}
