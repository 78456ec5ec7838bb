/* A single-threaded epoll event loop with fd callbacks and timers.
 *
 * Timers are intrusive: the caller embeds an st_timer in its own struct, so arming a timer
 * allocates nothing (the heap of armed timers grows by doubling only). Deadlines are
 * absolute st_ns values on the monotonic clock (st_now()).
 *
 * Precision: the wait uses epoll_pwait2 (nanosecond timeout) when the kernel has it, else
 * epoll_wait with a millisecond timeout rounded down. With st_loop_set_spin(l, ns) the
 * loop busy-polls (epoll with a zero timeout) for the last `ns` before the next deadline,
 * which removes the kernel's wake-up latency from timer firing at the cost of CPU.
 * The lateness of every timer firing (now - deadline) can be observed with a hook.
 *
 * No globals; one loop per thread. Callbacks may add/remove fds and arm/disarm timers,
 * including the one being dispatched, and may free the struct holding a timer after
 * disarming it (or after it fired). */
#ifndef ST_LOOP_H
#define ST_LOOP_H
#include <stdint.h>

#include "core/clock.h"

typedef struct st_loop st_loop;

/* Event bits passed to fd callbacks and used in st_loop_add_fd/st_loop_mod_fd. */
enum {
    ST_EV_READ = 1u,
    ST_EV_WRITE = 2u,
    ST_EV_ERROR = 4u, /* EPOLLERR or EPOLLHUP (always reported; ST_EV_READ comes with it) */
};

typedef void (*st_fd_cb)(st_loop *l, int fd, uint32_t events, void *arg);
typedef void (*st_timer_cb)(st_loop *l, void *arg);

typedef struct st_timer {
    st_ns deadline;
    uint64_t seq; /* FIFO order among equal deadlines */
    st_timer_cb cb;
    void *arg;
    uint32_t heap_idx; /* 0: not armed; else index+1 in the loop's heap */
} st_timer;

st_loop *st_loop_new(void);
/* Frees the loop; does not close registered fds. */
void st_loop_free(st_loop *l);

/* Registers fd (non-blocking) for the events; one registration per fd. 0 or -1 (errno). */
int st_loop_add_fd(st_loop *l, int fd, uint32_t events, st_fd_cb cb, void *arg);
int st_loop_mod_fd(st_loop *l, int fd, uint32_t events);
/* Unregisters fd (call before close). Pending events for it in this iteration are dropped. */
int st_loop_del_fd(st_loop *l, int fd);

void st_timer_init(st_timer *t, st_timer_cb cb, void *arg);
/* Arms (or re-arms) t for the absolute deadline. 0, or -1 when out of memory. */
int st_timer_arm(st_loop *l, st_timer *t, st_ns deadline);
/* Disarms t if armed (safe to call on an unarmed timer). */
void st_timer_disarm(st_loop *l, st_timer *t);
static inline int st_timer_armed(const st_timer *t) { return t->heap_idx != 0; }

/* Busy-poll for the last spin_ns before a timer deadline (0: never spin, the default). */
void st_loop_set_spin(st_loop *l, st_ns spin_ns);
/* Called with (deadline, fired_at) for every timer dispatched. */
typedef void (*st_loop_late_cb)(void *arg, st_ns deadline, st_ns fired_at);
void st_loop_set_late_hook(st_loop *l, st_loop_late_cb cb, void *arg);

/* Called after the fd callbacks of each epoll batch (before timers run): lets a caller that
 * only read in its fd callbacks process what it read, so that the read timestamps of one
 * batch are not delayed by the processing of the earlier fds in it. */
typedef void (*st_loop_batch_cb)(st_loop *l, void *arg);
void st_loop_set_batch_hook(st_loop *l, st_loop_batch_cb cb, void *arg);

/* Waits at most max_wait ns (<0: until the next timer or fd event; 0: poll) for events,
 * then dispatches ready fds and expired timers. Returns the number of callbacks run,
 * or -1 on an epoll error. */
int st_loop_run_once(st_loop *l, st_ns max_wait);
/* Runs until st_loop_stop is called (from a callback). 0, or -1 on an epoll error. */
int st_loop_run(st_loop *l);
void st_loop_stop(st_loop *l);
int st_loop_stopped(const st_loop *l);
/* The earliest armed deadline, or -1 when no timer is armed. */
st_ns st_loop_next_deadline(const st_loop *l);
/* 1 when epoll_pwait2 is in use (sub-millisecond waits without spinning). */
int st_loop_has_ns_wait(const st_loop *l);

#endif
