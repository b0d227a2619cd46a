/* session.c — model + tokenizer + per-turn prompts (see session.h). */
#include "gen/session.h"

#include "base/err.h"
#include "base/mem.h"
#include "gen/builtin.h"
#include "model/plan.h"
#include "text/chat.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bytes and number of the *.safetensors files in dir (for the loading line). */
static uint64_t shard_bytes(const char *dir, int *nfiles) {
    uint64_t total = 0;
    *nfiles = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 12 || strcmp(e->d_name + n - 12, ".safetensors")) continue;
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st)) continue;
        total += (uint64_t)st.st_size;
        (*nfiles)++;
    }
    closedir(d);
    return total;
}

int k3_session_open(k3_session *s, const k3_gen_opts *o, FILE *note) {
    memset(s, 0, sizeof *s);
    if (o->model) {
        s->dir = k3_xstrdup(o->model);
    } else {
        int created = 0;
        s->dir = k3_builtin_model(&created);
        if (!s->dir) return -1;
        s->builtin = 1;
        fprintf(note,
                "[k3] No --model given: using the built-in tiny model (%s%s).\n"
                "[k3] Its weights are RANDOM, so the text below is gibberish by design; pass\n"
                "[k3] --model DIR for a real checkpoint.\n",
                s->dir, created ? ", just written" : "");
        fflush(note);
    }
    k3_load_opts lo = {.threads = o->threads,
                       .progress = isatty(2),
                       .tp_size = 1,
                       .pp_size = 1,
                       .cache_type = o->cache_type};
    if (lo.progress) {
        int nf;
        uint64_t b = shard_bytes(s->dir, &nf);
        fprintf(stderr, "[k3] loading %s (%.2f %s in %d safetensors file%s)\n", s->dir,
                b >= 1000000000 ? (double)b / 1e9 : (double)b / 1e6, b >= 1000000000 ? "GB" : "MB",
                nf, nf == 1 ? "" : "s");
    }
    double t0 = k3_now();
    s->m = k3_model_load(s->dir, &lo);
    if (!s->m) return -1;
    s->load_s = k3_now() - t0;
    /* one sequence's state and latents at --ctx-size must fit: say so now,
       not when a long conversation runs out of memory */
    if (o->ctx_size > 0 && k3_seq_plan_check(s->m, o->ctx_size, 0, 0)) return -1;
    if (isatty(2)) fprintf(stderr, "[k3] loaded %s in %.2f s\n", s->dir, s->load_s);
    s->tok = k3_tok_open(s->dir, k3_model_vocab(s->m));
    if (!s->tok) return k3_preferr("tokenizer of %s", s->dir);
    if (k3_xtml_init(&s->x, s->tok)) return k3_preferr("tokenizer of %s", s->dir);
    return 0;
}

void k3_session_close(k3_session *s) {
    k3_tok_free(s->tok);
    if (s->m) k3_model_free(s->m);
    free(s->dir);
    memset(s, 0, sizeof *s);
}

static json_t *turn_messages(const char *system, const char *user) {
    json_t *msgs = json_array();
    if (system)
        json_array_append_new(msgs, json_pack("{ssss}", "role", "system", "content", system));
    json_array_append_new(msgs, json_pack("{ssss}", "role", "user", "content", user));
    return msgs;
}

static int raw_turn(k3_session *s, const char *user, k3_ids *ids, k3_chan_state *initial) {
    size_t n0 = ids->n;
    if (k3_tok_encode_append(s->tok, user, strlen(user), 1, ids)) return -1;
    *initial = k3_chan_initial_state(&s->x, s->tok, ids->ids, ids->n);
    if (ids->n == n0) return k3_seterr("the prompt is empty");
    return 0;
}

int k3_session_turn(k3_session *s, const char *system, const char *user, int first, int thinking,
                    int raw, k3_ids *ids, k3_chan_state *initial) {
    if (raw) return raw_turn(s, user, ids, initial);
    k3_chat_input in = {0};
    k3_chat_opts_default(&in.opts);
    in.opts.thinking = thinking;
    in.opts.has_effort = first && thinking;
    json_t *msgs = turn_messages(system, user);
    in.messages = msgs;
    k3_chat_segs segs = {0};
    int rc = k3_chat_build(&s->x, &in, &segs);
    if (!rc) rc = k3_chat_segs_encode(s->tok, &segs, ids);
    if (!rc) *initial = k3_chan_initial_state(&s->x, s->tok, ids->ids, ids->n);
    k3_chat_segs_free(&segs);
    json_decref(msgs);
    return rc;
}

int k3_session_close_turn(k3_session *s, int32_t last_id, int stopped_by_id, k3_chan_state state,
                          k3_ids *ids) {
    if (stopped_by_id) { /* the model ended the message itself: feed its stop token */
        k3_ids_push(ids, last_id);
        return 0;
    }
    if (last_id >= 0) k3_ids_push(ids, last_id);
    char tail[4 * K3_XTML_MARKER_MAX + 64];
    size_t n = 0;
    if (state == K3_CHAN_REASONING)
        n += k3_xtml_close_tag(&s->x, K3_XT_THINK, tail + n);
    else if (state == K3_CHAN_TOOL)
        n += k3_xtml_close_tag(&s->x, K3_XT_TOOLS, tail + n);
    else
        n += k3_xtml_close_tag(&s->x, K3_XT_RESPONSE, tail + n);
    n += k3_xtml_close_tag(&s->x, K3_XT_MESSAGE, tail + n);
    memcpy(tail + n, s->x.ctrl[K3_XC_EOM], s->x.ctrl_len[K3_XC_EOM]);
    n += s->x.ctrl_len[K3_XC_EOM];
    return k3_tok_encode_append(s->tok, tail, n, 1, ids);
}
