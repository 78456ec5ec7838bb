#include "emu/fit.h"

#include <math.h>
#include <string.h>

#define GOLDEN 0.6180339887498949
/* golden-section steps per parameter per sweep: the interval shrinks to 0.618^N of its width */
#define FIT_GOLDEN_STEPS 9

typedef struct fit_ctx {
    st_fit_param *p;
    int k;
    st_fit_objective f;
    void *arg;
    double x[ST_FIT_MAX_PARAMS];
    double best_x[ST_FIT_MAX_PARAMS];
    double prev[ST_FIT_MAX_PARAMS]; /* the values of the previous call */
    double best;
    int evals;
} fit_ctx;

static double to_u(const st_fit_param *p, double v) { return p->log ? log(v) : v; }
static double from_u(const st_fit_param *p, double u) { return p->log ? exp(u) : u; }

/* Evaluates with parameter i at value v (the others at their current values). */
static double eval_at(fit_ctx *c, int i, double v)
{
    c->x[i] = v;
    int moved = -2;
    for (int j = 0; j < c->k; j++)
        if (c->x[j] != c->prev[j])
            moved = moved == -2 ? j : -1;
    if (moved == -2)
        moved = i; /* same point again: any index is right */
    double l = c->f(c->arg, c->x, moved);
    memcpy(c->prev, c->x, sizeof(double) * (size_t)c->k);
    c->evals++;
    if (!isfinite(l))
        l = INFINITY;
    if (l < c->best) {
        c->best = l;
        memcpy(c->best_x, c->x, sizeof(double) * (size_t)c->k);
    }
    return l;
}

/* Golden-section search of parameter i over [a, b] (in search units); leaves x[i] at the best
 * value found (which may be the starting one). */
static void search(fit_ctx *c, int i, double a, double b)
{
    const st_fit_param *p = &c->p[i];
    double start = c->x[i];
    double fstart = c->best; /* x is at the best point when a search starts */
    double x1 = b - GOLDEN * (b - a), x2 = a + GOLDEN * (b - a);
    double f1 = eval_at(c, i, from_u(p, x1)), f2 = eval_at(c, i, from_u(p, x2));
    for (int s = 0; s < FIT_GOLDEN_STEPS; s++) {
        if (f1 <= f2) {
            b = x2;
            x2 = x1;
            f2 = f1;
            x1 = b - GOLDEN * (b - a);
            f1 = eval_at(c, i, from_u(p, x1));
        } else {
            a = x1;
            x1 = x2;
            f1 = f2;
            x2 = a + GOLDEN * (b - a);
            f2 = eval_at(c, i, from_u(p, x2));
        }
    }
    double bx = f1 <= f2 ? x1 : x2, bf = f1 <= f2 ? f1 : f2;
    /* keep the start when the search found nothing better (noise) */
    c->x[i] = bf < fstart ? from_u(p, bx) : start;
    memcpy(c->x, c->best_x, sizeof(double) * (size_t)c->k);
}

int st_fit_minimise(st_fit_param *p, int k, st_fit_objective f, void *arg, int sweeps, st_fit_result *res)
{
    if (k <= 0 || k > ST_FIT_MAX_PARAMS || !f)
        return -1;
    fit_ctx c = { .p = p, .k = k, .f = f, .arg = arg, .best = INFINITY };
    for (int i = 0; i < k; i++) {
        if (p[i].log && !(p[i].lo > 0))
            return -1;
        c.x[i] = p[i].value;
    }
    memcpy(c.best_x, c.x, sizeof(double) * (size_t)k);
    memcpy(c.prev, c.x, sizeof(double) * (size_t)k);
    double l0 = f(arg, c.x, -1);
    c.evals = 1;
    if (!isfinite(l0))
        return -1;
    c.best = l0;
    /* the search interval: the whole range on the first sweep, then a window around the best
     * value that halves each sweep */
    double width = 1.0;
    int s;
    for (s = 0; s < sweeps; s++) {
        double before = c.best;
        for (int i = 0; i < k; i++) {
            if (p[i].fixed)
                continue;
            double lo = to_u(&p[i], p[i].lo), hi = to_u(&p[i], p[i].hi), u = to_u(&p[i], c.x[i]);
            double w = width;
            if (p[i].width > 0 && p[i].width < w)
                w = p[i].width;
            double half = (hi - lo) * w / 2;
            double a = w >= 1 ? lo : fmax(lo, u - half), b = w >= 1 ? hi : fmin(hi, u + half);
            if (b > a)
                search(&c, i, a, b);
        }
        width /= 2;
        if (before - c.best < 1e-4 * fabs(before) && s > 0)
            break;
    }
    for (int i = 0; i < k; i++)
        p[i].value = c.best_x[i];
    if (res) {
        res->loss0 = l0;
        res->loss = c.best;
        res->evaluations = c.evals;
        res->sweeps = s < sweeps ? s + 1 : sweeps;
    }
    return 0;
}
