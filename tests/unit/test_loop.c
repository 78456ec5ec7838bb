/* Event loop: timer order, cancel/re-arm, fd callbacks, stop, never firing early. */
#include "harness.h"

#include <fcntl.h>
#include <unistd.h>

#include "net/loop.h"

typedef struct tctx {
    st_loop *l;
    int order[64];
    int n;
    st_ns fired[64];
    st_ns deadline[64];
} tctx;

typedef struct tnode {
    st_timer t;
    tctx *c;
    int id;
} tnode;

static void on_timer(st_loop *l, void *arg)
{
    tnode *tn = arg;
    tctx *c = tn->c;
    if (c->n < 64) {
        c->fired[c->n] = st_now();
        c->deadline[c->n] = tn->t.deadline;
        c->order[c->n++] = tn->id;
    }
}

static void timers_fire_in_deadline_order(void **state)
{
    (void)state;
    st_loop *l = st_loop_new();
    assert_non_null(l);
    tctx c = { .l = l };
    tnode nodes[40];
    st_ns base = st_now() + 2 * ST_NS_PER_MS;
    /* deadlines in a scrambled order, some equal (FIFO among equals) */
    for (int i = 0; i < 40; i++) {
        nodes[i].c = &c;
        nodes[i].id = i;
        st_timer_init(&nodes[i].t, on_timer, &nodes[i]);
        st_ns off = (st_ns)((i * 7919) % 40) * 50 * ST_NS_PER_US;
        assert_int_equal(st_timer_arm(l, &nodes[i].t, base + off), 0);
    }
    /* cancel a few, re-arm one later */
    st_timer_disarm(l, &nodes[3].t);
    st_timer_disarm(l, &nodes[17].t);
    st_timer_disarm(l, &nodes[17].t); /* twice is harmless */
    assert_int_equal(st_timer_armed(&nodes[3].t), 0);
    assert_int_equal(st_timer_arm(l, &nodes[5].t, base + 10 * ST_NS_PER_MS), 0);
    st_ns stop_at = st_now() + 2 * ST_NS_PER_S;
    while (st_loop_next_deadline(l) >= 0 && st_now() < stop_at)
        assert_true(st_loop_run_once(l, 100 * ST_NS_PER_MS) >= 0);
    assert_int_equal(c.n, 38);
    for (int i = 0; i < c.n; i++) {
        assert_true(c.fired[i] >= c.deadline[i]); /* never early */
        if (i > 0)
            assert_true(c.deadline[i] >= c.deadline[i - 1]);
        assert_true(c.order[i] != 3 && c.order[i] != 17);
    }
    assert_int_equal(c.order[c.n - 1], 5);
    st_loop_free(l);
}

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

static void heap_random_stress(void **state)
{
    (void)state;
    st_loop *l = st_loop_new();
    tctx c = { .l = l };
    enum { N = 500 };
    tnode *nodes = calloc(N, sizeof *nodes);
    uint64_t r = 7;
    st_ns base = st_now() - ST_NS_PER_S; /* all already due */
    for (int i = 0; i < N; i++) {
        nodes[i].c = &c;
        nodes[i].id = i;
        st_timer_init(&nodes[i].t, on_timer, &nodes[i]);
    }
    for (int round = 0; round < 5000; round++) {
        int i = (int)(lcg(&r) % N);
        if (lcg(&r) % 10 < 3)
            st_timer_disarm(l, &nodes[i].t);
        else
            st_timer_arm(l, &nodes[i].t, base + (st_ns)(lcg(&r) % 1001));
    }
    /* pop all: the deadlines must come out sorted */
    st_ns last = -1;
    int count = 0;
    while (st_loop_next_deadline(l) >= 0 && count < N + 1) {
        st_ns d = st_loop_next_deadline(l);
        assert_true(d >= last);
        last = d;
        for (int i = 0; i < N; i++)
            if (st_timer_armed(&nodes[i].t) && nodes[i].t.deadline == d) {
                st_timer_disarm(l, &nodes[i].t);
                break;
            }
        count++;
    }
    assert_true(count <= N);
    free(nodes);
    st_loop_free(l);
}

typedef struct pctx {
    st_loop *l;
    int rfd;
    char got[64];
    size_t len;
    int rearm_count;
    st_timer t;
} pctx;

static void on_pipe(st_loop *l, int fd, uint32_t ev, void *arg)
{
    pctx *p = arg;
    assert_true(ev & ST_EV_READ);
    ssize_t n = read(fd, p->got + p->len, sizeof p->got - 1 - p->len);
    if (n > 0)
        p->len += (size_t)n;
    if (n == 0) {
        st_loop_del_fd(l, fd);
        st_loop_stop(l);
    }
}

static void on_rearm(st_loop *l, void *arg)
{
    pctx *p = arg;
    if (++p->rearm_count < 5)
        st_timer_arm(l, &p->t, st_now() + 100 * ST_NS_PER_US); /* re-arm from its own callback */
}

static void fd_callbacks_and_stop(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe2(fds, O_NONBLOCK), 0);
    st_loop *l = st_loop_new();
    pctx p = { .l = l, .rfd = fds[0] };
    assert_int_equal(st_loop_add_fd(l, fds[0], ST_EV_READ, on_pipe, &p), 0);
    assert_int_equal(st_loop_add_fd(l, fds[0], ST_EV_READ, on_pipe, &p), -1); /* twice */
    st_timer_init(&p.t, on_rearm, &p);
    st_timer_arm(l, &p.t, st_now());
    assert_int_equal(write(fds[1], "hello", 5), 5);
    st_ns stop_at = st_now() + 2 * ST_NS_PER_S;
    while (p.rearm_count < 5 && st_now() < stop_at)
        st_loop_run_once(l, 50 * ST_NS_PER_MS);
    assert_int_equal(p.rearm_count, 5);
    assert_int_equal(p.len, 5);
    close(fds[1]);
    while (!st_loop_stopped(l) && st_now() < stop_at)
        st_loop_run_once(l, 50 * ST_NS_PER_MS);
    assert_true(st_loop_stopped(l));
    assert_string_equal(p.got, "hello");
    close(fds[0]);
    st_loop_free(l);
}

typedef struct lctx {
    int n;
    st_ns worst;
} lctx;

static void late_hook(void *arg, st_ns deadline, st_ns fired)
{
    lctx *c = arg;
    c->n++;
    if (fired - deadline > c->worst)
        c->worst = fired - deadline;
    assert_true(fired >= deadline);
}

static void spin_mode_and_late_hook(void **state)
{
    (void)state;
    st_loop *l = st_loop_new();
    st_loop_set_spin(l, 200 * ST_NS_PER_US);
    lctx lc = { 0, 0 };
    st_loop_set_late_hook(l, late_hook, &lc);
    tctx c = { .l = l };
    tnode nodes[20];
    st_ns base = st_now();
    for (int i = 0; i < 20; i++) {
        nodes[i].c = &c;
        nodes[i].id = i;
        st_timer_init(&nodes[i].t, on_timer, &nodes[i]);
        st_timer_arm(l, &nodes[i].t, base + (i + 1) * 300 * ST_NS_PER_US);
    }
    st_ns stop_at = st_now() + 2 * ST_NS_PER_S;
    while (st_loop_next_deadline(l) >= 0 && st_now() < stop_at)
        st_loop_run_once(l, -1);
    assert_int_equal(lc.n, 20);
    assert_int_equal(c.n, 20);
    print_message("# timer lateness worst %.1f us (spin 200 us, pwait2 %d)\n", lc.worst / 1e3, st_loop_has_ns_wait(l));
    st_loop_free(l);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(timers_fire_in_deadline_order),
        cmocka_unit_test(heap_random_stress),
        cmocka_unit_test(fd_callbacks_and_stop),
        cmocka_unit_test(spin_mode_and_late_hook),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
