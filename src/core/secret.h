/* Secret values servetune knows while it runs (an API key, every value it expands from a
 * ${VAR} reference) and their removal from everything it writes: results, reports, logs,
 * stderr. Redaction replaces each occurrence with "***", longest secret first, so the text
 * only ever shrinks and a secret that contains another is removed whole.
 *
 * A secret shorter than ST_SECRET_MIN_LEN bytes cannot be told apart from ordinary text
 * (redacting "0" would garble every number); st_secrets_add refuses one, and the spec check
 * refuses a ${VAR} that expands to one (docs/audit-spec.md, "Secrets"). */
#ifndef ST_CORE_SECRET_H
#define ST_CORE_SECRET_H
#include <stddef.h>
#include <stdio.h>

#define ST_SECRETS_MAX 64
#define ST_SECRET_MIN_LEN 4

typedef struct st_secrets {
    char *v[ST_SECRETS_MAX]; /* owned copies, longest first */
    size_t len[ST_SECRETS_MAX];
    int n;
} st_secrets;

/* A zeroed st_secrets is empty. Adds a copy of value (a value already held is not added
 * twice). 0; -1 when value is shorter than ST_SECRET_MIN_LEN (NULL and "" are ignored: 0), the
 * set is full or memory ran out. */
int st_secrets_add(st_secrets *s, const char *value);
void st_secrets_free(st_secrets *s);
/* dst (empty) gets copies of src's secrets. 0 or -1 (out of memory; dst is left empty). */
int st_secrets_copy(st_secrets *dst, const st_secrets *src);

/* Replaces every secret in the NUL-terminated text by "***", in place. NULL s or text: nothing. */
void st_secrets_redact(const st_secrets *s, char *text);
/* The same over n bytes that may hold NULs; returns the new length. */
size_t st_secrets_redact_n(const st_secrets *s, char *buf, size_t n);
/* How many bytes at the end of buf[0..n) could be the beginning of a secret cut by the end of
 * the buffer: what a stream must hold back until more bytes come (0 when none). */
size_t st_secrets_partial_tail(const st_secrets *s, const char *buf, size_t n);

/* Whether a variable or flag name looks like it holds a credential: one of its words
 * (separated by _ or -) is KEY, TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL(S), APIKEY or
 * AUTHORIZATION (case-insensitive). HF_TOKEN and --api-key do; --max-num-batched-tokens does not. */
int st_secret_name(const char *name);

/* A FILE that writes through to `under` with the secrets redacted (s must outlive it). Text is
 * passed on at each flush or when the stream's buffer (ST_SECRETS_STREAM_BUF) fills; a secret
 * cut by a buffer boundary is held back until the rest comes. fclose it (it flushes; `under` is
 * not closed). NULL when it cannot be made. */
#define ST_SECRETS_STREAM_BUF 65536
FILE *st_secrets_stream(FILE *under, const st_secrets *s);

#endif
