/* Agent task graphs (load/agent.h, load/agent_run.h, emu/sim.h dependent nodes): the WEKA-style
 * sample trace and the task-graph sample read into the graph worked out by hand (parents, gaps,
 * lengths, fan-out, depth, ideal prefix-cache hits); bad files refused with file:line; the
 * workload's shared blocks; the engine model replays a fan-out and join (a node after its last
 * parent plus its gap, its prompt grown by their answers; a failed parent skips its
 * descendants); the task figures of known records. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "audit/check.h"
#include "audit/spec.h"
#include "audit/sweep.h"
#include "core/buf.h"
#include "core/file.h"
#include "emu/catalog.h"
#include "emu/config.h"
#include "emu/sim.h"
#include "load/agent.h"
#include "load/agent_run.h"

#include "emu_config.h"

static char *read_example(const char *name, size_t *len)
{
    char path[512], err[256];
    snprintf(path, sizeof path, "examples/%s", name); /* tests run in the repository root */
    char *t = st_read_file(path, 1 << 20, len, err, sizeof err);
    if (!t)
        fail_msg("%s", err);
    return t;
}

static uint32_t find(const st_agent_graph *g, const char *task, const char *id)
{
    for (uint32_t i = 0; i < g->n; i++)
        if (!strcmp(g->nodes[i].id, id) && !strcmp(g->tasks[g->nodes[i].task].name, task))
            return i;
    fail_msg("no node %s in task %s", id, task);
    return 0;
}

static int has_parent(const st_agent_graph *g, uint32_t i, uint32_t p)
{
    for (uint32_t j = 0; j < g->nodes[i].n_parents; j++)
        if (g->nodes[i].parents[j] == p)
            return 1;
    return 0;
}

static void weka_sample(void **state)
{
    (void)state;
    size_t len;
    char *t = read_example("agent-weka-sample.json", &len);
    st_agent_graph g;
    char err[512];
    assert_int_equal(st_agent_sniff(t, len), ST_AGENT_FMT_WEKA);
    if (st_agent_parse(t, len, "w", &g, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(g.n_tasks, 1);
    assert_string_equal(g.tasks[0].name, "demo");
    assert_int_equal(g.n, 7); /* r0, a0, a1, b0, r1, c0, r2 */
    uint32_t r0 = find(&g, "demo", "r0"), a0 = find(&g, "demo", "agent_a.0"), a1 = find(&g, "demo", "agent_a.1");
    uint32_t b0 = find(&g, "demo", "agent_b.0"), r1 = find(&g, "demo", "r1"), c0 = find(&g, "demo", "agent_c.0");
    uint32_t r2 = find(&g, "demo", "r2");
    /* the per-request input lengths, in file order */
    const uint32_t in[7] = { 300, 200, 260, 150, 420, 100, 500 };
    const uint32_t idx[7] = { r0, a0, a1, b0, r1, c0, r2 };
    for (int k = 0; k < 7; k++)
        assert_int_equal(g.nodes[idx[k]].input_len, in[k]);
    assert_int_equal(g.tasks[0].root, r0);
    assert_int_equal(g.nodes[r0].n_parents, 0);
    /* sub-agents start after the planner's request before their marker */
    assert_true(has_parent(&g, a0, r0) && g.nodes[a0].n_parents == 1);
    assert_true(fabs(g.nodes[a0].gap_s - 0.2) < 1e-9);                           /* 1.2 - (0 + api_time 1.0) */
    assert_true(has_parent(&g, a1, a0) && fabs(g.nodes[a1].gap_s - 0.3) < 1e-9); /* its think_time */
    assert_true(has_parent(&g, b0, r0) && fabs(g.nodes[b0].gap_s - 0.25) < 1e-9);
    /* the planner's next request joins both sub-agents: after the last to end (a1: 2.5 + 0.5) */
    assert_int_equal(g.nodes[r1].n_parents, 3);
    assert_true(has_parent(&g, r1, r0) && has_parent(&g, r1, a1) && has_parent(&g, r1, b0));
    assert_true(fabs(g.nodes[r1].gap_s - 0.5) < 1e-9);
    /* an async_launched sub-agent: nothing waits for it */
    assert_true(has_parent(&g, c0, r1) && g.nodes[c0].background);
    assert_int_equal(g.nodes[r2].n_parents, 1);
    assert_true(has_parent(&g, r2, r1) && fabs(g.nodes[r2].gap_s - 0.5) < 1e-9);
    assert_int_equal(g.nodes[r1].depth, 3);
    assert_int_equal(g.nodes[r2].depth, 4);

    st_agent_stats s;
    assert_int_equal(st_agent_stats_compute(&g, &s), 0);
    assert_int_equal(s.nodes, 7);
    assert_int_equal(s.fanouts, 2); /* r0 -> a0, b0, r1; r1 -> c0, r2 */
    assert_int_equal(s.width_max, 3);
    assert_true(fabs(s.width_mean - 2.5) < 1e-9);
    assert_int_equal(s.joins, 1);
    assert_int_equal(s.depth_max, 4);
    assert_int_equal(s.background, 1);
    assert_int_equal(s.prompt_tokens, 1930);
    /* leading blocks already seen, in time order: 0 + 128 + 128 + 256 + 320 + 0 + 448 */
    assert_int_equal(s.ideal_hit_tokens, 1280);
    assert_true(fabs(s.ideal_hit_rate - 1280.0 / 1930.0) < 1e-12);
    assert_int_equal(s.block_refs, 34);
    assert_int_equal(s.blocks_unique, 14);
    assert_int_equal(s.blocks_shared, 9);

    /* the workload: the root on the schedule, the rest dependent; shared blocks, shared ids */
    st_workload w;
    assert_int_equal(st_agent_workload(&g, 0, &w, err, sizeof err), 0);
    assert_int_equal(w.n, 7);
    assert_int_equal(w.n_dependent, 6);
    assert_int_equal(w.n_tasks, 1);
    assert_int_equal(w.items[0].input_len, 300);
    assert_int_equal(w.items[0].n_children, 3);
    assert_true(w.items[0].arrival < 0); /* WEKA traces: the arrival process starts them */
    const st_work_item *wr1 = NULL, *wa0 = NULL;
    for (uint32_t i = 0; i < w.n; i++) {
        if (w.items[i].input_len == 420)
            wr1 = &w.items[i];
        if (w.items[i].input_len == 200)
            wa0 = &w.items[i];
    }
    assert_non_null(wr1);
    assert_non_null(wa0);
    assert_int_equal(wr1->n_parents, 3);
    assert_false(wr1->grow);
    assert_memory_equal(wr1->input_ids, w.items[0].input_ids, 300 * sizeof(uint32_t)); /* blocks 1-5 */
    assert_memory_equal(wa0->input_ids, w.items[0].input_ids, 128 * sizeof(uint32_t)); /* blocks 1, 2 */
    assert_memory_not_equal(wa0->input_ids + 128, w.items[0].input_ids + 128, 64 * sizeof(uint32_t));
    st_workload_free(&w);
    st_agent_graph_free(&g);
    free(t);
}

static void graph_sample(void **state)
{
    (void)state;
    size_t len;
    char *t = read_example("agent-tasks.jsonl", &len);
    st_agent_graph g;
    char err[512];
    assert_int_equal(st_agent_sniff(t, len), ST_AGENT_FMT_GRAPH);
    if (st_agent_parse(t, len, "g", &g, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(g.n_tasks, 2);
    assert_int_equal(g.n, 9);
    uint32_t j1 = find(&g, "t1", "join"), p2 = find(&g, "t2", "plan");
    assert_int_equal(g.nodes[j1].n_parents, 3);
    assert_int_equal(g.nodes[j1].depth, 2);
    assert_true(g.nodes[j1].grow);
    assert_int_equal(g.nodes[j1].block_size, 256);
    assert_true(fabs(g.tasks[1].start_s - 2) < 1e-12);
    assert_int_equal(g.tasks[1].root, p2);
    st_agent_stats s;
    assert_int_equal(st_agent_stats_compute(&g, &s), 0);
    assert_int_equal(s.fanouts, 2);
    assert_int_equal(s.width_count[3], 1);
    assert_int_equal(s.width_count[2], 1);
    assert_int_equal(s.joins, 2);
    assert_int_equal(s.prompt_tokens, 8000);
    /* t1: 0 + 3 x 512 + 1024; t2 (the blocks are global here): 1024 + 2 x 512 + 1024 */
    assert_int_equal(s.ideal_hit_tokens, 5632);
    st_workload w;
    assert_int_equal(st_agent_workload(&g, 7, &w, err, sizeof err), 0);
    assert_int_equal(w.n_dependent, 7);
    assert_true(w.items[0].arrival == 0 && w.items[1].arrival == 2000000000); /* the tasks' starts */
    assert_memory_equal(w.items[0].input_ids, w.items[1].input_ids, 1024 * sizeof(uint32_t));
    st_workload_free(&w);
    st_agent_graph_free(&g);
    free(t);
}

/* The audit's runs (st_agent_workload_n): whole tasks, passes repeated with fresh ids, the last
 * pass cut after the task that reaches the count, children and sessions renumbered, the starts of
 * a later pass one mean gap after the previous pass's last. The sample: t1 (5 nodes, start 0) and
 * t2 (4 nodes, start 2): a pass lasts 2 + 2 s. */
static void repeated_passes(void **state)
{
    (void)state;
    size_t len;
    char *t = read_example("agent-tasks.jsonl", &len);
    st_agent_graph g;
    char err[512];
    if (st_agent_parse(t, len, "g", &g, err, sizeof err))
        fail_msg("%s", err);
    st_workload w, one;
    /* 3 requests: t1 whole (5) */
    assert_int_equal(st_agent_workload_n(&g, 7, 3, &w, err, sizeof err), 0);
    assert_int_equal(w.n, 5);
    assert_int_equal(w.n_tasks, 1);
    assert_int_equal(w.n_dependent, 4);
    for (uint32_t i = 0; i < w.n; i++)
        assert_int_equal(w.items[i].session, 1);
    st_workload_free(&w);
    /* 12 requests: a pass (9), then t1 again (5): 14 */
    assert_int_equal(st_agent_workload_n(&g, 7, 12, &w, err, sizeof err), 0);
    assert_int_equal(st_agent_workload(&g, 7, &one, err, sizeof err), 0);
    assert_int_equal(w.n, 14);
    assert_int_equal(w.n_tasks, 3);
    assert_int_equal(w.n_dependent, 11);
    assert_true(w.items[0].arrival == 0 && w.items[1].arrival == 2000000000LL && w.items[2].arrival == 4000000000LL);
    assert_int_equal(w.items[2].session, 3);
    /* pass 0 is the single pass: the same ids; pass 1 has its own */
    assert_memory_equal(w.items[0].input_ids, one.items[0].input_ids, one.items[0].input_len * sizeof(uint32_t));
    assert_memory_not_equal(w.items[2].input_ids, one.items[0].input_ids, one.items[0].input_len * sizeof(uint32_t));
    uint32_t parents[14] = { 0 };
    for (uint32_t i = 0; i < w.n; i++) {
        assert_int_equal(w.items[i].id, i);
        for (uint32_t c = 0; c < w.items[i].n_children; c++) {
            uint32_t j = w.items[i].children[c];
            assert_true(j >= 3 && j < w.n); /* a child is dependent, within the workload */
            assert_int_equal(w.items[j].session, w.items[i].session);
            parents[j]++;
        }
    }
    for (uint32_t i = 0; i < w.n; i++)
        assert_int_equal(parents[i], w.items[i].n_parents);
    st_workload_free(&one);
    st_workload_free(&w);
    st_agent_graph_free(&g);
    free(t);
}

static void expect_error(const char *text, const char *want)
{
    st_agent_graph g;
    char err[512] = "";
    assert_int_equal(st_agent_parse(text, strlen(text), "f.jsonl", &g, err, sizeof err), -1);
    if (!strstr(err, want))
        fail_msg("expected \"%s\" in \"%s\"", want, err);
}

static void bad_graphs(void **state)
{
    (void)state;
    expect_error("{\"task\":1,\"id\":\"a\",\"parents\":[],\"input_tokens\":5,\"output_tokens\":5}\n"
                 "{\"task\":1,\"id\":\"b\",\"parents\":[\"c\"],\"input_tokens\":5,\"output_tokens\":5}\n"
                 "{\"task\":1,\"id\":\"c\",\"parents\":[\"b\"],\"input_tokens\":5,\"output_tokens\":5}\n",
                 "f.jsonl:2: node b of task 1 is on a cycle of parents");
    expect_error("{\"task\":1,\"id\":\"a\",\"parents\":[],\"input_tokens\":5,\"output_tokens\":5}\n"
                 "{\"task\":1,\"id\":\"b\",\"parents\":[\"zz\"],\"input_tokens\":5,\"output_tokens\":5}\n",
                 "f.jsonl:2: node b: its parent zz never appears in task 1");
    expect_error("{\"task\":1,\"id\":\"a\",\"parents\":[],\"input_tokens\":5,\"output_tokens\":5}\n"
                 "\n{\"task\":1,\"id\":\"a\",\"parents\":[],\"input_tokens\":5,\"output_tokens\":5}\n",
                 "f.jsonl:3: node a appears twice in task 1 (first on line 1)");
    expect_error("{\"task\":1,\"id\":\"a\",\"parents\":[],\"input_tokens\":5,\"output_tokens\":5}\n"
                 "{\"task\":1,\"id\":\"b\",\"parents\":[],\"input_tokens\":5,\"output_tokens\":5}\n",
                 "f.jsonl:2: task 1 has a second node without parents");
    expect_error("{\"task\":1,\"id\":\"a\",\"parents\":[\"a\"],\"input_tokens\":5,\"output_tokens\":5}\n",
                 "f.jsonl:1: node a is its own parent");
    expect_error("{\"task\":1,\"id\":\"a\",\"parents\":[],\"input_tokens\":0,\"output_tokens\":5}\n",
                 "f.jsonl:1: input_tokens");
    expect_error("{\"task\":1,\"id\":\"a\",\"parents\":[],\"input_tokens\":5,\"output_tokens\":5,\"gap\":-1}\n",
                 "f.jsonl:1: gap");
    expect_error("{\"task\":1,\"id\":\"a\",\"parents\":[],\"input_tokens\":5,\"output_tokens\":5,\"start\":0}\n"
                 "{\"task\":2,\"id\":\"a\",\"parents\":[],\"input_tokens\":5,\"output_tokens\":5}\n",
                 "f.jsonl:2: start: given on some tasks");
    expect_error("{\"block_size\": 64, \"requests\": [\n {\"t\": 0, \"type\": \"n\", \"in\": 10, \"out\": 1},\n"
                 " {\"t\": 1, \"type\": \"x\", \"in\": 10, \"out\": 1}]}",
                 "f.jsonl:3: type");
    expect_error("{\"requests\": []}", "f.jsonl:1: not an agent trace");
}

/* Sub-agents whose request times count from their marker (the raw captures' convention). */
static void weka_relative_times(void **state)
{
    (void)state;
    const char *t =
        "{\"block_size\": 16, \"requests\": ["
        "{\"t\": 10, \"type\": \"n\", \"in\": 10, \"out\": 1, \"api_time\": 1},"
        "{\"t\": 12, \"type\": \"subagent\", \"agent_id\": \"x\", \"status\": \"completed\", \"requests\": ["
        "  {\"t\": 0.5, \"type\": \"n\", \"in\": 10, \"out\": 1, \"api_time\": 1}]},"
        "{\"t\": 20, \"type\": \"n\", \"in\": 10, \"out\": 1}]}";
    st_agent_graph g;
    char err[512];
    if (st_agent_parse(t, strlen(t), "r", &g, err, sizeof err))
        fail_msg("%s", err);
    uint32_t x0 = find(&g, "trace1", "x.0"), r1 = find(&g, "trace1", "r1");
    assert_true(fabs(g.nodes[x0].t_s - 12.5) < 1e-9);
    assert_true(fabs(g.nodes[x0].gap_s - 1.5) < 1e-9); /* 12.5 - (10 + 1) */
    assert_true(fabs(g.nodes[r1].gap_s - 6.5) < 1e-9); /* 20 - (12.5 + 1) */
    st_agent_graph_free(&g);
}

/* ---- the engine model replays a fan-out and join ---- */

/* plan -> w0, w1, w2 -> join, as sim items (0 is the root; 1-4 dependent). */
static const uint32_t plan_children[3] = { 1, 2, 3 };
static const uint32_t worker_children[1] = { 4 };

static void dag_items(st_emu_sim_item it[5], int grow)
{
    memset(it, 0, 5 * sizeof *it);
    it[0] = (st_emu_sim_item){
        .input_len = 400, .output_len = 50, .session = 1, .children = plan_children, .n_children = 3
    };
    for (uint32_t k = 1; k <= 3; k++)
        it[k] = (st_emu_sim_item){ .input_len = 200,
                                   .output_len = 20 + 40 * k,
                                   .dependent = 1,
                                   .think = 100000000,
                                   .session = 1,
                                   .turn = 1,
                                   .children = worker_children,
                                   .n_children = 1,
                                   .n_parents = 1,
                                   .grow = grow };
    it[4] = (st_emu_sim_item){ .input_len = 300,
                               .output_len = 30,
                               .dependent = 1,
                               .think = 50000000,
                               .session = 1,
                               .turn = 2,
                               .n_parents = 3,
                               .grow = grow };
}

static void model_replays_fan_out_and_join(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    st_emu_sim_item it[5];
    st_record rec[5];
    st_emu_sim_stats s;
    char err[512];
    for (int grow = 0; grow <= 1; grow++) {
        dag_items(it, grow);
        assert_int_equal(st_emu_sim_run(&c, it, 5, rec, &s, err, sizeof err), 0);
        assert_int_equal(s.completed, 5);
        st_ns last = -1;
        for (uint32_t k = 1; k <= 3; k++) {
            assert_int_equal(rec[k].status, ST_REQ_OK);
            assert_int_equal(rec[k].scheduled, rec[0].end + 100000000); /* after the plan + its gap */
            assert_int_equal(rec[k].input_tokens, 200 + (grow ? 50 : 0));
            if (rec[k].end > last)
                last = rec[k].end;
        }
        /* the join after its LAST parent, plus its gap; its prompt grew by the three answers */
        assert_int_equal(rec[4].scheduled, last + 50000000);
        assert_int_equal(rec[4].input_tokens, 300 + (grow ? 60 + 100 + 140 : 0));
        /* and the figures of the task */
        st_workload w = { 0 };
        st_work_item wi[5];
        memset(wi, 0, sizeof wi);
        for (uint32_t k = 0; k < 5; k++) {
            wi[k].session = 1;
            wi[k].turn = it[k].turn;
            wi[k].n_parents = it[k].n_parents;
            wi[k].children = (uint32_t *)it[k].children;
            wi[k].n_children = it[k].n_children;
        }
        w.items = wi;
        w.n = 5;
        w.n_dependent = 4;
        w.n_tasks = 1;
        st_agent_run_stats a;
        assert_int_equal(st_agent_run_stats_compute(&w, rec, 5, 1e9, &a), 0);
        assert_int_equal(a.completed, 1);
        assert_true(fabs(a.makespan.p50 - (double)(rec[4].end - rec[0].scheduled) / 1e9) < 1e-9);
        /* the critical path: join, the worker that ended last, the plan */
        uint32_t wl = 1;
        for (uint32_t k = 2; k <= 3; k++)
            if (rec[k].end > rec[wl].end)
                wl = k;
        double cp = st_record_ttft(&rec[4]) + st_record_ttft(&rec[wl]) + st_record_ttft(&rec[0]);
        assert_true(fabs(a.cp_ttft.p50 - cp) < 1e-9);
        assert_int_equal(a.cp_nodes_max, 3);
        assert_int_equal(a.node_ttft.n, 5);
        assert_int_equal(a.slo_met, 1);
        assert_int_equal(a.n_depth_rows, 3);
        assert_int_equal(a.depth[1].completed, 3);
        /* the audit's makespan term from the records alone: the same makespan */
        double mv[5];
        assert_int_equal(st_agent_makespans(rec, 5, 0, 1e-9, INFINITY, -INFINITY, INFINITY, 0, 0, mv), 1);
        assert_true(fabs(mv[0] - a.makespan.p50) < 1e-9);
        /* online, before the join ended: nothing known yet, unless already past the limit */
        double now = (double)(rec[4].end - 1) * 1e-9, el = now - (double)rec[0].scheduled * 1e-9;
        assert_int_equal(st_agent_makespans(rec, 5, 0, 1e-9, now, -INFINITY, INFINITY, 1, el + 1, mv), 0);
        assert_int_equal(st_agent_makespans(rec, 5, 0, 1e-9, now, -INFINITY, INFINITY, 1, el / 2, mv), 1);
        assert_true(fabs(mv[0] - el) < 1e-9);
        /* a window that does not hold the task's start: none */
        assert_int_equal(st_agent_makespans(rec, 5, 0, 1e-9, INFINITY, 1e9, INFINITY, 0, 0, mv), 0);
        for (uint32_t k = 0; k < 5; k++)
            st_record_free(&rec[k]);
    }
    /* a worker the engine refuses: the join is skipped, the other workers still run */
    dag_items(it, 1);
    it[2].input_len = 100000;
    assert_int_equal(st_emu_sim_run(&c, it, 5, rec, &s, err, sizeof err), 0);
    assert_int_equal(rec[2].status, ST_REQ_HTTP_STATUS);
    assert_int_equal(rec[4].status, ST_REQ_SKIPPED);
    assert_true(rec[4].sent < 0);
    assert_int_equal(rec[1].status, ST_REQ_OK);
    assert_int_equal(rec[3].status, ST_REQ_OK);
    for (uint32_t k = 0; k < 5; k++)
        st_record_free(&rec[k]);
}

/* Synthetic agent tasks (sessions with fan_out): the shape, the shared ids, the engine model's replay. */
static void synthetic_tasks(void **state)
{
    (void)state;
    st_session_params p = { .sessions = 3,
                            .turns_min = 3,
                            .turns_max = 3,
                            .first_input = 500,
                            .user_input = 50,
                            .output_len = 20,
                            .prefix_len = 100,
                            .think_s = 0.5,
                            .seed = 9,
                            .fan_out_min = 2,
                            .fan_out_max = 4 };
    st_workload w;
    char err[512];
    if (st_workload_sessions(&p, &w, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(w.n_tasks, 3);
    assert_int_equal(w.n - w.n_dependent, 3);
    uint32_t expect = 0;
    for (uint32_t t = 0; t < 3; t++) {
        const st_work_item *root = &w.items[t];
        assert_int_equal(root->n_parents, 0);
        assert_int_equal(root->input_len, 500);
        uint32_t from = t, nodes = 1;
        for (int r = 0; r < 2; r++) { /* two rounds of fan-out and join */
            const st_work_item *pl = &w.items[from];
            uint32_t W = pl->n_children;
            assert_true(W >= 2 && W <= 4);
            uint32_t join = w.items[pl->children[0]].children[0];
            for (uint32_t k = 0; k < W; k++) {
                const st_work_item *wk = &w.items[pl->children[k]];
                assert_int_equal(wk->n_parents, 1);
                assert_int_equal(wk->input_len, 150);
                assert_true(wk->grow);
                assert_int_equal(wk->think, 500000000);
                assert_int_equal(wk->turn, 2 * r + 1);
                assert_memory_equal(wk->input_ids, root->input_ids, 100 * sizeof(uint32_t)); /* the shared prefix */
                assert_int_equal(wk->children[0], join);
            }
            const st_work_item *j = &w.items[join];
            assert_int_equal(j->n_parents, W);
            assert_int_equal(j->input_len, 550);
            assert_memory_equal(j->input_ids, root->input_ids, 500 * sizeof(uint32_t)); /* the planner's context */
            assert_int_equal(j->turn, 2 * r + 2);
            nodes += W + 1;
            from = join;
        }
        expect += nodes;
    }
    assert_int_equal(w.n, expect);
    /* on the engine model: every request completes; a join's prompt grew by its workers' answers */
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    st_emu_sim_item *it = calloc(w.n, sizeof *it);
    st_record *rec = calloc(w.n, sizeof *rec);
    assert_non_null(it);
    assert_non_null(rec);
    st_emu_sim_items_from_workload(&w, NULL, it);
    st_emu_sim_stats s;
    assert_int_equal(st_emu_sim_run(&c, it, w.n, rec, &s, err, sizeof err), 0);
    assert_int_equal(s.completed, w.n);
    for (uint32_t i = 0; i < w.n; i++)
        if (w.items[i].n_parents > 1)
            assert_int_equal(rec[i].input_tokens, 550 + 20 * w.items[i].n_parents);
    st_agent_run_stats a;
    assert_int_equal(st_agent_run_stats_compute(&w, rec, w.n, 0, &a), 0);
    assert_int_equal(a.completed, 3);
    assert_int_equal(a.cp_nodes_max, 5);   /* planner, worker, join, worker, join */
    assert_true(a.makespan.min > 4 * 0.5); /* four gaps of 0.5 s on every path */
    st_records_free(rec, w.n);
    free(it);
    st_workload_free(&w);
    /* refused: a fan-out beyond the limit */
    p.fan_out_max = ST_AGENT_FAN_OUT_MAX + 1;
    assert_int_equal(st_workload_sessions(&p, &w, err, sizeof err), -1);
    assert_non_null(strstr(err, "fan-out"));
}

/* A spec with synthetic sessions (the %s). */
#define SPEC_BASE                                                                                                      \
    "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"                                           \
    "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2}\n"                                              \
    "peak_rate: 1\nrates: [1]\nslo: {ttft_p95_ms: 1000, tpot_p95_ms: 100}\nconfigurations: [{name: base}]\n"           \
    "workload: {input_tokens: 600, output_tokens: 50, shared_prefix: 100, sessions: %s}\n"

/* The spec's `sessions: {fan_out: ...}`: parsed, passed to the generator, counted per task; refused
 * when out of range or with a single turn. */
/* A spec whose workload.trace is an agent trace (audit/spec.h workload.agent): read whole, its
 * requests per task size the runs, the rates count tasks, the sweep's workload is whole tasks. */
static void spec_agent_trace(void **state)
{
    (void)state;
    const char *base = "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
                       "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2}\npeak_rate: 1\n"
                       "slo: {ttft_p95_ms: 1000, tpot_p95_ms: 100, makespan_p95_ms: 8000}\n"
                       "workload: {trace: examples/agent-tasks.jsonl}\n";
    char text[1024], err[512];
    st_spec s;
    snprintf(text, sizeof text, "%srates: [1]\n", base);
    if (st_spec_parse("s.yaml", text, strlen(text), &s, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(s.workload.agent, ST_AGENT_FMT_GRAPH);
    assert_true(s.workload.sessions.on);
    assert_true(fabs(st_spec_turns_mean(&s) - 4.5) < 1e-12); /* 9 requests, 2 tasks */
    assert_string_equal(st_spec_rate_unit(&s), "tasks/s");
    st_spec_free(&s);
    snprintf(text, sizeof text, "%sconcurrency: [1, 2]\n", base);
    assert_int_equal(st_spec_parse("s.yaml", text, strlen(text), &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "s.yaml:6: concurrency: not with an agent trace"));
    /* a request trace stays one */
    char path[] = "/tmp/st_agent_spec_XXXXXX", rt[1024];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *row = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5}\n";
    assert_int_equal(write(fd, row, strlen(row)), (ssize_t)strlen(row));
    close(fd);
    snprintf(rt, sizeof rt,
             "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
             "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2}\npeak_rate: 1\n"
             "slo: {ttft_p95_ms: 1000, tpot_p95_ms: 100}\nrates: [1]\nworkload: {trace: %s}\n",
             path);
    int rc = st_spec_parse("s.yaml", rt, strlen(rt), &s, err, sizeof err);
    remove(path);
    if (rc)
        fail_msg("%s", err);
    assert_int_equal(s.workload.agent, 0);
    assert_string_equal(st_spec_rate_unit(&s), "req/s");
    st_spec_free(&s);
}

static void spec_fan_out(void **state)
{
    (void)state;
    char text[1024], err[512];
    st_spec s;
    snprintf(text, sizeof text, SPEC_BASE, "{turns: 3, fan_out: 2-4, user_tokens: 40}");
    if (st_spec_parse("s.yaml", text, strlen(text), &s, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(s.workload.sessions.fan_out_min, 2);
    assert_int_equal(s.workload.sessions.fan_out_max, 4);
    assert_true(fabs(st_spec_turns_mean(&s) - (1 + 2 * (3 + 1))) < 1e-12); /* requests per task */
    st_session_params p;
    st_spec_sessions(&s, 90, 1, &p);
    assert_int_equal(p.sessions, 10);
    assert_int_equal(p.fan_out_max, 4);
    st_workload w;
    assert_int_equal(st_workload_sessions(&p, &w, err, sizeof err), 0);
    assert_int_equal(w.n_tasks, 10);
    st_workload_free(&w);
    st_spec_free(&s);
    /* the makespan SLO term: with tasks only */
    const char *ms_spec = "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
                          "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2}\n"
                          "peak_rate: 1\nrates: [1]\nconfigurations: [{name: base}]\n"
                          "slo: {ttft_p95_ms: 1000, tpot_p95_ms: 100, makespan_p95_ms: 8000}\n"
                          "workload: {input_tokens: 600, output_tokens: 50}\n";
    assert_int_equal(st_spec_parse("m.yaml", ms_spec, strlen(ms_spec), &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "slo: makespan_* needs tasks"));
    snprintf(text, sizeof text, SPEC_BASE, "{turns: 2, fan_out: 3}");
    char *with = strstr(text, "tpot_p95_ms: 100}");
    assert_non_null(with);
    char text2[1200];
    snprintf(text2, sizeof text2, "%.*stpot_p95_ms: 100, makespan_p95_ms: 8000}%s", (int)(with - text), text,
             with + strlen("tpot_p95_ms: 100}"));
    if (st_spec_parse("m.yaml", text2, strlen(text2), &s, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(s.slo.terms[2].metric, ST_SLO_MAKESPAN);
    assert_string_equal(st_slo_metric_name(s.slo.terms[2].metric), "makespan");
    st_spec_free(&s);
    snprintf(text, sizeof text, SPEC_BASE, "{turns: 1, fan_out: 3}");
    assert_int_equal(st_spec_parse("s.yaml", text, strlen(text), &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "fan_out: needs turns of 2 or more"));
    snprintf(text, sizeof text, SPEC_BASE, "{turns: 2, fan_out: 0}");
    assert_int_equal(st_spec_parse("s.yaml", text, strlen(text), &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "workload.sessions.fan_out: expected N or MIN-MAX"));
}

/* Three tasks against a context of 1500 tokens: task a's join asks 1000 + 200 of its own (within
 * the context) but its prompt grows by its two workers' answers (300 each) to 1600, 1800 in all;
 * task b fits everywhere (its largest node 1100); task c's one node is 3000 tokens alone. */
static const char CTX_TASKS[] =
    "{\"task\": \"a\", \"id\": \"plan\", \"parents\": [], \"input_tokens\": 1000, \"output_tokens\": 100}\n"
    "{\"task\": \"a\", \"id\": \"w1\", \"parents\": [\"plan\"], \"input_tokens\": 500, \"output_tokens\": 300}\n"
    "{\"task\": \"a\", \"id\": \"w2\", \"parents\": [\"plan\"], \"input_tokens\": 500, \"output_tokens\": 300}\n"
    "{\"task\": \"a\", \"id\": \"join\", \"parents\": [\"w1\", \"w2\"], \"input_tokens\": 1000, \"output_tokens\": "
    "200}\n"
    "{\"task\": \"b\", \"id\": \"plan\", \"parents\": [], \"input_tokens\": 1000, \"output_tokens\": 100}\n"
    "{\"task\": \"b\", \"id\": \"w1\", \"parents\": [\"plan\"], \"input_tokens\": 500, \"output_tokens\": 300}\n"
    "{\"task\": \"b\", \"id\": \"w2\", \"parents\": [\"plan\"], \"input_tokens\": 500, \"output_tokens\": 300}\n"
    "{\"task\": \"b\", \"id\": \"join\", \"parents\": [\"w1\", \"w2\"], \"input_tokens\": 100, \"output_tokens\": "
    "200}\n"
    "{\"task\": \"c\", \"id\": \"solo\", \"parents\": [], \"input_tokens\": 3000, \"output_tokens\": 50}\n";

/* The graph is sound: every node's parents and children in its task, the root without parents,
 * the order every node once with its parents before it. */
static void graph_is_sound(const st_agent_graph *g)
{
    uint32_t *pos = malloc(g->n * sizeof *pos);
    assert_non_null(pos);
    for (uint32_t i = 0; i < g->n; i++)
        pos[i] = UINT32_MAX;
    for (uint32_t k = 0; k < g->n; k++) {
        assert_true(g->order[k] < g->n && pos[g->order[k]] == UINT32_MAX);
        pos[g->order[k]] = k;
    }
    for (uint32_t i = 0; i < g->n; i++) {
        const st_agent_node *x = &g->nodes[i];
        assert_true(x->task < g->n_tasks);
        for (uint32_t j = 0; j < x->n_parents; j++) {
            assert_int_equal(g->nodes[x->parents[j]].task, x->task);
            assert_true(pos[x->parents[j]] < pos[i]);
        }
        for (uint32_t j = 0; j < x->n_children; j++)
            assert_true(has_parent(g, x->children[j], i));
    }
    for (uint32_t t = 0; t < g->n_tasks; t++) {
        assert_int_equal(g->nodes[g->tasks[t].root].task, t);
        assert_int_equal(g->nodes[g->tasks[t].root].n_parents, 0);
    }
    free(pos);
}

/* A node's context is its prompt as the graph grows it plus its output; a task holding a node over
 * the context is left out whole (counted as tasks and requests); what is kept is a sound graph
 * whose workload holds only nodes within the context. */
static void tasks_over_context(void **state)
{
    (void)state;
    st_agent_graph g;
    char err[512];
    if (st_agent_parse(CTX_TASKS, strlen(CTX_TASKS), "ctx", &g, err, sizeof err))
        fail_msg("%s", err);
    uint32_t ja = find(&g, "a", "join"), w1 = find(&g, "a", "w1"), jb = find(&g, "b", "join");
    assert_int_equal(st_agent_node_context(&g, ja), 1000 + 300 + 300 + 200);
    assert_int_equal(st_agent_node_context(&g, w1), 500 + 100 + 300);
    assert_int_equal(st_agent_node_context(&g, jb), 100 + 600 + 200);
    st_agent_fit f;
    uint8_t over[3];
    assert_int_equal(st_agent_fit_context(&g, 1500, over, &f), 0);
    assert_int_equal(f.tasks, 3);
    assert_int_equal(f.requests, 9);
    assert_int_equal(f.tasks_over, 2);
    assert_int_equal(f.requests_over, 5); /* all of a's 4, c's 1 */
    assert_int_equal(f.nodes_over, 2);
    assert_int_equal(f.first, ja);
    assert_int_equal(f.first_need, 1800);
    assert_true(over[0] && !over[1] && over[2]);
    /* without a context nothing is over */
    assert_int_equal(st_agent_fit_context(&g, 0, NULL, &f), 0);
    assert_int_equal(f.tasks_over, 0);

    assert_int_equal(st_agent_keep_within(&g, 1500, &f), 0);
    assert_int_equal(f.tasks_over, 2);
    assert_int_equal(g.n_tasks, 1);
    assert_int_equal(g.n, 4);
    assert_string_equal(g.tasks[0].name, "b");
    assert_int_equal(g.tasks[0].n_nodes, 4);
    graph_is_sound(&g);
    assert_int_equal(g.nodes[find(&g, "b", "join")].n_parents, 2);
    for (uint32_t i = 0; i < g.n; i++)
        assert_true(st_agent_node_context(&g, i) <= 1500);
    st_workload w;
    assert_int_equal(st_agent_workload_n(&g, 3, 10, &w, err, sizeof err), 0);
    assert_int_equal(w.n, 12); /* three passes of task b */
    assert_int_equal(w.n_tasks, 3);
    st_workload_free(&w);
    /* a second pass over the kept graph leaves it as it is */
    assert_int_equal(st_agent_keep_within(&g, 1500, &f), 0);
    assert_int_equal(f.tasks_over, 0);
    assert_int_equal(g.n, 4);
    st_agent_graph_free(&g);
}

/* An agent-trace audit against a configuration's context (--max-model-len): --check says the tasks
 * left out and names the first request over it, the sweep's workload holds only the other tasks;
 * a context no task fits is refused. */
static void spec_agent_over_context(void **state)
{
    (void)state;
    char path[] = "/tmp/st_agent_ctx_XXXXXX", text[1024], err[768];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, CTX_TASKS, strlen(CTX_TASKS)), (ssize_t)strlen(CTX_TASKS));
    close(fd);
#define CTX_SPEC                                                                                                       \
    "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100, --max-model-len, '%u']}\n"                    \
    "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2}\npeak_rate: 1\n"                                \
    "slo: {ttft_p95_ms: 1000, tpot_p95_ms: 100, makespan_p95_ms: 8000}\n"                                              \
    "workload: {trace: %s}\nrates: [1]\n"
    st_spec s;
    snprintf(text, sizeof text, CTX_SPEC, 1500u, path);
    if (st_spec_parse("s.yaml", text, strlen(text), &s, err, sizeof err))
        fail_msg("%s", err);
    uint32_t ctx = st_sweep_config_context(&s, &s.configs[0]);
    assert_int_equal(ctx, 1500);
    st_sweep_agent_fit a;
    assert_int_equal(st_sweep_agent_over_context(&s, ctx, &a, err, sizeof err), 0);
    assert_int_equal(a.fit.tasks_over, 2);
    assert_int_equal(a.fit.requests_over, 5);
    assert_string_equal(a.task, "a");
    assert_string_equal(a.node, "join");
    if (st_spec_check(&s, err, sizeof err))
        fail_msg("--check refused a trace of which one task fits: %s", err);
    st_buf b;
    st_buf_init(&b, 1 << 16);
    st_spec_warnings(&s, 0, &b);
    const char *want = "2 of the agent trace's 3 tasks (66.7 %; 5 of its 9 requests) hold a request longer";
    if (!b.data || !strstr(b.data, want) || !strstr(b.data, "the first: node join of task a, 1800 tokens"))
        fail_msg("--check's warnings '%s' lack '%s'", b.data ? b.data : "", want);
    st_buf_free(&b);
    st_workload w;
    assert_int_equal(st_sweep_workload_ctx(&s, 1, 8, ctx, &w, err, sizeof err), 0);
    assert_int_equal(w.n, 8); /* two passes of task b (not a's 4 and b's 4) */
    assert_int_equal(w.n_tasks, 2);
    uint32_t joins = 0;
    for (uint32_t i = 0; i < w.n; i++) {
        assert_true(w.items[i].input_len <= 1000);
        joins += w.items[i].input_len == 100;
    }
    assert_int_equal(joins, 2);
    st_workload_free(&w);
    /* the same workload without the context holds task a's and c's nodes */
    assert_int_equal(st_sweep_workload_ctx(&s, 1, 9, 0, &w, err, sizeof err), 0);
    assert_int_equal(w.n, 9);
    assert_int_equal(w.n_tasks, 3);
    st_workload_free(&w);
    st_spec_free(&s);

    snprintf(text, sizeof text, CTX_SPEC, 800u, path);
    if (st_spec_parse("s.yaml", text, strlen(text), &s, err, sizeof err))
        fail_msg("%s", err);
    if (st_spec_check(&s, err, sizeof err) == 0 || !strstr(err, "every one of the agent trace's 3 tasks"))
        fail_msg("--check accepted an agent trace none of whose tasks fits 800 tokens (err '%s')", err);
    assert_int_equal(st_sweep_workload_ctx(&s, 1, 8, 800, &w, err, sizeof err), -1);
    assert_non_null(strstr(err, "every one of its 3 tasks"));
    st_spec_free(&s);
    remove(path);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(weka_sample),
        cmocka_unit_test(graph_sample),
        cmocka_unit_test(repeated_passes),
        cmocka_unit_test(bad_graphs),
        cmocka_unit_test(weka_relative_times),
        cmocka_unit_test(model_replays_fan_out_and_join),
        cmocka_unit_test(synthetic_tasks),
        cmocka_unit_test(spec_fan_out),
        cmocka_unit_test(spec_agent_trace),
        cmocka_unit_test(tasks_over_context),
        cmocka_unit_test(spec_agent_over_context),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
