/* Deploy snippets for a configuration: what to run to serve it the way it was audited or
 * planned. Pure functions of the configuration (the spec's engine block, the configuration's
 * model, flags and environment): no I/O.
 *
 *   st_deploy_command    the engine's own command line (`vllm serve MODEL FLAGS ...`, SGLang's
 *                        launch_server, TGI's launcher, `llama-server`)
 *   st_deploy_docker     `docker run` of the engine's published image with the same arguments
 *   st_deploy_k8s        a Kubernetes Deployment and Service (GPU limits, /health probes,
 *                        Prometheus scrape annotations, shared memory for vLLM/SGLang)
 *   st_deploy_runpod_env the RunPod vLLM worker's environment variables (vLLM only)
 *
 * The emulator stands for vLLM: its own flags (--gpu, --time-scale, ...) are left out and the
 * snippets are vLLM's. Flags are kept exactly as given (one argv word each) and shell-quoted
 * where a shell reads them. Environment values are never expanded: a value that is a ${VAR}
 * reference stays a reference (a shell variable, a Kubernetes Secret key, a console setting).
 * docs/deploy.md shows the output for the example spec. */
#ifndef ST_REPORT_DEPLOY_H
#define ST_REPORT_DEPLOY_H
#include <stddef.h>

#include "audit/spec.h"
#include "core/buf.h"

typedef struct st_deploy_opts {
    const char *image; /* the container image; NULL: the engine's published image */
    long replicas;     /* Kubernetes replicas (e.g. replicas at peak); < 1 means 1 */
} st_deploy_opts;

/* 1 when configuration c of s can be deployed from a snippet (not an endpoint). */
int st_deploy_supported(const st_spec *s);

/* Each appends its snippet to out (no trailing fence; a final newline). 0, or -1 when out's
 * error is set (core/buf.h) or the engine is an endpoint (nothing to deploy). */
int st_deploy_command(const st_spec *s, const st_spec_config *c, st_buf *out);
int st_deploy_docker(const st_spec *s, const st_spec_config *c, const st_deploy_opts *o, st_buf *out);
int st_deploy_k8s(const st_spec *s, const st_spec_config *c, const st_deploy_opts *o, st_buf *out);
/* vLLM (and the emulator) only: the worker's variables, NAME=value per line. -1 for others. */
int st_deploy_runpod_env(const st_spec *s, const st_spec_config *c, st_buf *out);

/* A markdown section "## Deploy <name>" with all of the above in fenced blocks. */
int st_deploy_markdown(const st_spec *s, const st_spec_config *c, const st_deploy_opts *o, st_buf *out);

/* The name a Kubernetes object gets from a configuration name: lower case [a-z0-9-], at most
 * 63 characters, starting and ending with a letter or digit ("llm" when nothing is left). */
void st_deploy_k8s_name(const char *config, char *out, size_t n);

#endif
