/* Shell quoting for the scripts servetune writes for others to run (Slurm batch scripts, the
 * submit script kept for inspection). servetune itself never runs a command through a shell;
 * these scripts are run by sbatch/slurmstepd or by a person.
 *
 * st_buf_sh_quote appends s as one single-quoted POSIX shell word: every byte stands for itself
 * inside '...', and a single quote is written as '\'' (close, escaped quote, reopen). The word
 * is the same string for sh, bash, dash and zsh whatever s holds ($, `, \, ", newlines, %, *). */
#ifndef ST_CORE_SHQUOTE_H
#define ST_CORE_SHQUOTE_H
#include "core/buf.h"

int st_buf_sh_quote(st_buf *b, const char *s);
/* Whether s can be written as it is in a shell word and a comment: letters, digits and
 * "@%+=:,./_-" only, and not empty. */
int st_sh_plain(const char *s);

#endif
