/* A small derivative-free minimiser for the engine model's free constants: coordinate descent
 * with a golden-section search per parameter (in log space for positive scales), a few sweeps
 * with the search interval narrowing around the best value. The objective is a simulation,
 * so it is noisy, cheap to reason about and expensive to call: the search calls it about
 * 10-14 times per parameter per sweep and tells it which parameter moved, so that a caller
 * can re-run only what that parameter affects. Pure (the objective does the work). */
#ifndef ST_EMU_FIT_H
#define ST_EMU_FIT_H
#include <stddef.h>

#define ST_FIT_MAX_PARAMS 48

typedef struct st_fit_param {
    const char *name;
    double value;  /* start value in, best value out */
    double lo, hi; /* bounds (lo > 0 when log) */
    int log;       /* search in log space */
    int fixed;     /* not searched */
    double width;  /* searched within this fraction of the range around the best value, at most
                      (a warm start); 0: the whole range on the first sweep */
} st_fit_param;

/* x: every parameter's current value (k of them); moved: the index that changed since the
 * previous call, or -1 (first call, or several changed). Returns the loss (lower is better;
 * NAN or INFINITY = unusable). */
typedef double (*st_fit_objective)(void *arg, const double *x, int moved);

typedef struct st_fit_result {
    double loss0, loss; /* at the start, at the end */
    int evaluations, sweeps;
} st_fit_result;

/* Minimises f over p[0..k) (k <= ST_FIT_MAX_PARAMS) with `sweeps` sweeps (3 is typical);
 * every p[i].value ends at the best point seen. 0, or -1 when k is out of range or the
 * starting point is unusable. */
int st_fit_minimise(st_fit_param *p, int k, st_fit_objective f, void *arg, int sweeps, st_fit_result *res);

#endif
