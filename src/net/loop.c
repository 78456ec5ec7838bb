#include "net/loop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "core/util.h"

#define LOOP_MAX_EVENTS 256

typedef struct fd_slot {
    st_fd_cb cb;
    void *arg;
    uint32_t gen;
    uint8_t used;
} fd_slot;

struct st_loop {
    int epfd;
    int has_pwait2;
    int stop;
    fd_slot *fds;
    size_t nfds;
    st_timer **heap;
    uint32_t heap_len;
    size_t heap_cap;
    uint64_t seq;
    st_ns spin;
    st_loop_late_cb late_cb;
    void *late_arg;
    st_loop_batch_cb batch_cb;
    void *batch_arg;
    struct epoll_event evs[LOOP_MAX_EVENTS];
};

st_loop *st_loop_new(void)
{
    st_loop *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l->epfd < 0) {
        free(l);
        return NULL;
    }
    struct timespec zero = { 0, 0 };
    struct epoll_event ev;
    errno = 0;
    l->has_pwait2 = !(epoll_pwait2(l->epfd, &ev, 1, &zero, NULL) < 0 && errno == ENOSYS);
    return l;
}

void st_loop_free(st_loop *l)
{
    if (!l)
        return;
    for (uint32_t i = 0; i < l->heap_len; i++)
        l->heap[i]->heap_idx = 0;
    close(l->epfd);
    free(l->fds);
    free(l->heap);
    free(l);
}

static uint32_t to_epoll(uint32_t ev)
{
    uint32_t e = 0;
    if (ev & ST_EV_READ)
        e |= EPOLLIN | EPOLLRDHUP;
    if (ev & ST_EV_WRITE)
        e |= EPOLLOUT;
    return e;
}

static int fd_grow(st_loop *l, int fd)
{
    size_t had = l->nfds;
    if (st_grow((void **)&l->fds, &l->nfds, (size_t)fd + 1, sizeof *l->fds, 64))
        return -1;
    memset(l->fds + had, 0, (l->nfds - had) * sizeof *l->fds);
    return 0;
}

int st_loop_add_fd(st_loop *l, int fd, uint32_t events, st_fd_cb cb, void *arg)
{
    if (fd < 0 || fd_grow(l, fd) < 0) {
        errno = fd < 0 ? EBADF : ENOMEM;
        return -1;
    }
    fd_slot *s = &l->fds[fd];
    if (s->used) {
        errno = EEXIST;
        return -1;
    }
    s->gen++;
    struct epoll_event ev = { .events = to_epoll(events), .data.u64 = ((uint64_t)s->gen << 32) | (uint32_t)fd };
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
        return -1;
    s->cb = cb;
    s->arg = arg;
    s->used = 1;
    return 0;
}

int st_loop_mod_fd(st_loop *l, int fd, uint32_t events)
{
    if (fd < 0 || (size_t)fd >= l->nfds || !l->fds[fd].used) {
        errno = EBADF;
        return -1;
    }
    struct epoll_event ev = { .events = to_epoll(events), .data.u64 = ((uint64_t)l->fds[fd].gen << 32) | (uint32_t)fd };
    return epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev);
}

int st_loop_del_fd(st_loop *l, int fd)
{
    if (fd < 0 || (size_t)fd >= l->nfds || !l->fds[fd].used) {
        errno = EBADF;
        return -1;
    }
    l->fds[fd].used = 0;
    l->fds[fd].gen++; /* events of this batch for fd are now stale */
    return epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
}

/* ---- timers: binary min-heap on (deadline, seq) ---- */

static int t_less(const st_timer *a, const st_timer *b)
{
    return a->deadline < b->deadline || (a->deadline == b->deadline && a->seq < b->seq);
}

static void h_set(st_loop *l, uint32_t i, st_timer *t)
{
    l->heap[i] = t;
    t->heap_idx = i + 1;
}

static void h_up(st_loop *l, uint32_t i)
{
    st_timer *t = l->heap[i];
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (!t_less(t, l->heap[p]))
            break;
        h_set(l, i, l->heap[p]);
        i = p;
    }
    h_set(l, i, t);
}

static void h_down(st_loop *l, uint32_t i)
{
    st_timer *t = l->heap[i];
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= l->heap_len)
            break;
        if (c + 1 < l->heap_len && t_less(l->heap[c + 1], l->heap[c]))
            c++;
        if (!t_less(l->heap[c], t))
            break;
        h_set(l, i, l->heap[c]);
        i = c;
    }
    h_set(l, i, t);
}

void st_timer_init(st_timer *t, st_timer_cb cb, void *arg)
{
    memset(t, 0, sizeof *t);
    t->cb = cb;
    t->arg = arg;
}

void st_timer_disarm(st_loop *l, st_timer *t)
{
    if (!t->heap_idx)
        return;
    uint32_t i = t->heap_idx - 1;
    t->heap_idx = 0;
    l->heap_len--;
    if (i == l->heap_len)
        return;
    st_timer *moved = l->heap[l->heap_len];
    h_set(l, i, moved);
    h_up(l, i);
    if (moved->heap_idx - 1 == i)
        h_down(l, i);
}

int st_timer_arm(st_loop *l, st_timer *t, st_ns deadline)
{
    st_timer_disarm(l, t);
    if (l->heap_len == l->heap_cap && st_grow((void **)&l->heap, &l->heap_cap, l->heap_len + 1, sizeof *l->heap, 64))
        return -1;
    t->deadline = deadline;
    t->seq = l->seq++;
    h_set(l, l->heap_len, t);
    l->heap_len++;
    h_up(l, l->heap_len - 1);
    return 0;
}

st_ns st_loop_next_deadline(const st_loop *l) { return l->heap_len ? l->heap[0]->deadline : -1; }

void st_loop_set_spin(st_loop *l, st_ns spin_ns) { l->spin = spin_ns > 0 ? spin_ns : 0; }

void st_loop_set_late_hook(st_loop *l, st_loop_late_cb cb, void *arg)
{
    l->late_cb = cb;
    l->late_arg = arg;
}

void st_loop_set_batch_hook(st_loop *l, st_loop_batch_cb cb, void *arg)
{
    l->batch_cb = cb;
    l->batch_arg = arg;
}

int st_loop_has_ns_wait(const st_loop *l) { return l->has_pwait2; }
void st_loop_stop(st_loop *l) { l->stop = 1; }
int st_loop_stopped(const st_loop *l) { return l->stop; }

static int run_timers(st_loop *l)
{
    int n = 0;
    uint64_t seq_limit = l->seq; /* timers armed by these callbacks wait for the next round */
    st_ns now = st_now();
    while (l->heap_len && l->heap[0]->deadline <= now) {
        st_timer *t = l->heap[0];
        if (t->seq >= seq_limit) {
            /* find any other due timer armed earlier: rare; stop here to stay bounded */
            break;
        }
        st_timer_disarm(l, t);
        st_ns fired = st_now();
        if (l->late_cb)
            l->late_cb(l->late_arg, t->deadline, fired);
        t->cb(l, t->arg);
        n++;
        now = st_now();
    }
    return n;
}

int st_loop_run_once(st_loop *l, st_ns max_wait)
{
    st_ns wait = max_wait;
    st_ns next = st_loop_next_deadline(l);
    if (next >= 0) {
        st_ns until = next - st_now();
        if (until < 0)
            until = 0;
        if (l->spin > 0)
            until = until > l->spin ? until - l->spin : 0;
        if (wait < 0 || until < wait)
            wait = until;
    }
    int nev;
    if (wait < 0) {
        nev = epoll_wait(l->epfd, l->evs, LOOP_MAX_EVENTS, -1);
    } else if (l->has_pwait2) {
        struct timespec ts = { (time_t)(wait / ST_NS_PER_S), (long)(wait % ST_NS_PER_S) };
        nev = epoll_pwait2(l->epfd, l->evs, LOOP_MAX_EVENTS, &ts, NULL);
    } else {
        /* rounded down: we wake early and poll/spin the rest rather than late */
        st_ns ms = wait / ST_NS_PER_MS;
        nev = epoll_wait(l->epfd, l->evs, LOOP_MAX_EVENTS, ms > 1000000 ? 1000000 : (int)ms);
    }
    if (nev < 0) {
        if (errno != EINTR)
            return -1;
        nev = 0;
    }
    int n = 0;
    for (int i = 0; i < nev; i++) {
        uint32_t fd = (uint32_t)l->evs[i].data.u64;
        uint32_t gen = (uint32_t)(l->evs[i].data.u64 >> 32);
        if (fd >= l->nfds || !l->fds[fd].used || l->fds[fd].gen != gen)
            continue;
        uint32_t e = l->evs[i].events, bits = 0;
        if (e & (EPOLLIN | EPOLLRDHUP))
            bits |= ST_EV_READ;
        if (e & EPOLLOUT)
            bits |= ST_EV_WRITE;
        if (e & (EPOLLERR | EPOLLHUP))
            bits |= ST_EV_ERROR | ST_EV_READ; /* a read then reports EOF or the error */
        l->fds[fd].cb(l, (int)fd, bits, l->fds[fd].arg);
        n++;
    }
    if (nev > 0 && l->batch_cb)
        l->batch_cb(l, l->batch_arg);
    n += run_timers(l);
    return n;
}

int st_loop_run(st_loop *l)
{
    l->stop = 0;
    while (!l->stop)
        if (st_loop_run_once(l, -1) < 0)
            return -1;
    return 0;
}
