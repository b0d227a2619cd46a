#!/usr/bin/env bash
# serve_store.sh — the Responses store against a real `k3 serve`: stored
# responses are scoped like the prompt cache (credential + cache_salt), and
# another scope's id answers exactly like an unknown one (previous_response_id,
# item_reference, GET / DELETE / input_items); ids are 128 random bits; several
# API keys (--api-key repeated, --api-key-file) each see only their own; key
# file errors and K3_API_KEY="" are refused; the store's bytes stay within
# --responses-mb (a 99,000-part body keeps a few bytes, a flood from one scope
# evicts its own responses, not another scope's).
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh
MODEL=$(serve_model) || { echo "FAIL serve_store_model"; exit 1; }

# ---- flags: key files and empty keys are refused before the model loads ----
KEYS="$SERVE_TMP/keys"
refused() { # name, expected text, command...
    local name=$1 want=$2 out rc
    shift 2
    out=$("$@" 2>&1 </dev/null)
    rc=$?
    if [ "$rc" -ne 0 ] && grep -qF -- "$want" <<<"$out"; then echo "PASS $name"; else
        echo "FAIL $name (rc $rc): $out"; fi
}
refused serve_store_keyfile_missing "$SERVE_TMP/none: cannot read" \
    "$K3" serve --model "$MODEL" --api-key-file "$SERVE_TMP/none"
printf '# only a comment\n\n' >"$KEYS.empty"
refused serve_store_keyfile_empty "$KEYS.empty: the API key file holds no key" \
    "$K3" serve --model "$MODEL" --api-key-file "$KEYS.empty"
printf 'good\nhas space\n' >"$KEYS.space"
refused serve_store_keyfile_bad_char "$KEYS.space:2:" \
    "$K3" serve --model "$MODEL" --api-key-file "$KEYS.space"
printf 'dup\n  dup  \n' >"$KEYS.dup"
refused serve_store_keyfile_duplicate "$KEYS.dup:2: this key is already given" \
    "$K3" serve --model "$MODEL" --api-key-file "$KEYS.dup"
refused serve_store_env_key_empty "K3_API_KEY is set but empty" \
    env K3_API_KEY= "$K3" serve --model "$MODEL" --port 0
refused serve_store_flag_key_empty "--api-key is empty" \
    "$K3" serve --model "$MODEL" --api-key ""

# ---- no API key: each credential (+ cache_salt) is its own scope ----
serve_start --test-mode --responses-mb 1 || { echo "FAIL serve_store_start"; exit 1; }
python3 - "$SERVE_PORT" open <<'PY' || echo "FAIL serve_store_open_script (exit $?)"
import json, re, sys, urllib.request, urllib.error
port, mode = int(sys.argv[1]), sys.argv[2]
URL = "http://127.0.0.1:%d" % port

def check(name, ok, info=""):
    print(("PASS " if ok else "FAIL ") + name)
    if not ok:
        print("  " + str(info)[:400])

def call(method, path, key=None, body=None, xkey=None):
    data = json.dumps(body).encode() if body is not None else None
    rq = urllib.request.Request(URL + path, data=data, method=method)
    if key is not None:
        rq.add_header("Authorization", "Bearer " + key)
    if xkey is not None:
        rq.add_header("x-api-key", xkey)
    if data is not None:
        rq.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(rq, timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()

def create(key, inp="hi", **kw):
    body = {"model": "tiny", "input": inp, "max_output_tokens": 4, "k3_test_force_text": "ok"}
    body.update(kw)
    st, b = call("POST", "/v1/responses", key, body)
    return st, (json.loads(b) if st == 200 else b)

def metric(name):
    st, b = call("GET", "/metrics", "A")
    m = re.search(r"^%s\{[^}]*\} (\S+)$" % name, b.decode(), re.M)
    return float(m.group(1)) if m else None

FAKE = "resp_" + "0" * 32

def same_as_unknown(status, body, real_id, unknown_status, unknown_body, fake=FAKE):
    return status == unknown_status and body.replace(real_id.encode(), b"ID") == \
        unknown_body.replace(fake.encode(), b"ID")

# ids: resp_ + 32 hex digits, all distinct
ids = []
for i in range(8):
    st, r = create("A", "secret A %d" % i)
    ids.append(r["id"] if st == 200 else "")
check("serve_store_id_format", all(re.fullmatch(r"resp_[0-9a-f]{32}", i) for i in ids), ids)
check("serve_store_ids_distinct", len(set(ids)) == len(ids), ids)
hexes = [i[5:] for i in ids]
# 128 random bits: no shared prefix the way a time/counter id has
check("serve_store_ids_no_common_prefix", len({h[:8] for h in hexes}) == len(hexes), hexes)
rid = ids[-1]
st, r = create("A", "hello")
rid = r["id"]
item = r["output"][0]["id"]
check("serve_store_item_id_unguessable", re.fullmatch(r"[a-z]+_[0-9a-f]{32}_\d+", item) and
      item.split("_")[1] == rid[5:], item)

# previous_response_id: A continues, B gets exactly what an unknown id gets
st, _ = create("A", "more", previous_response_id=rid)
check("serve_store_own_previous_ok", st == 200, st)
sb, bb = create("B", "more", previous_response_id=rid)
su, bu = create("B", "more", previous_response_id=FAKE)
check("serve_store_cross_scope_previous_is_unknown",
      sb == 400 and same_as_unknown(sb, bb, rid, su, bu) and b"previous_response_not_found" in bb,
      (sb, bb, su, bu))
sn, bn = create(None, "more", previous_response_id=rid)
check("serve_store_no_credential_previous_is_unknown", same_as_unknown(sn, bn, rid, su, bu), bn)

# item_reference: the same
ref = lambda i: [{"type": "item_reference", "id": i}, {"role": "user", "content": "q"}]
st, _ = create("A", ref(item))
check("serve_store_own_item_reference_ok", st == 200, st)
fake_item = "rs_" + "0" * 32 + "_1"
sb, bb = create("B", ref(item))
su, bu = create("B", ref(fake_item))
check("serve_store_cross_scope_item_reference_is_unknown",
      sb == 400 and same_as_unknown(sb, bb, item, su, bu, fake_item) and b"item_not_found" in bb,
      (sb, bb, su, bu))

# cache_salt is part of the scope
st, r = create("A", "salted", cache_salt="s1")
salted = r["id"]
st1, _ = create("A", "x", previous_response_id=salted, cache_salt="s1")
st2, _ = create("A", "x", previous_response_id=salted)
st3, _ = create("A", "x", previous_response_id=salted, cache_salt="s2")
check("serve_store_salt_scopes", (st1, st2, st3) == (200, 400, 400), (st1, st2, st3))

# GET / DELETE / input_items: another scope's id answers 404 exactly like an unknown id
su, bu = call("GET", "/v1/responses/" + FAKE, "B")
sb, bb = call("GET", "/v1/responses/" + rid, "B")
check("serve_store_get_cross_scope_404", su == 404 and same_as_unknown(sb, bb, rid, su, bu), (sb, bb))
sa, ba = call("GET", "/v1/responses/" + rid, "A")
check("serve_store_get_own", sa == 200 and json.loads(ba)["id"] == rid, (sa, ba[:200]))
sb, bb = call("GET", "/v1/responses/%s/input_items" % rid, "B")
su, bu = call("GET", "/v1/responses/%s/input_items" % FAKE, "B")
check("serve_store_input_items_cross_scope_404", sb == 404 and same_as_unknown(sb, bb, rid, su, bu), bb)
sg, bg = call("GET", "/v1/responses/%s?cache_salt=s1" % salted, "A")
check("serve_store_get_salted_with_query", sg == 200, (sg, bg[:200]))
sb, bb = call("DELETE", "/v1/responses/" + rid, "B")
su, bu = call("DELETE", "/v1/responses/" + FAKE, "B")
check("serve_store_delete_cross_scope_404", sb == 404 and same_as_unknown(sb, bb, rid, su, bu), bb)
sd, bd = call("DELETE", "/v1/responses/" + rid, "A")
check("serve_store_delete_own", sd == 200 and json.loads(bd) == {"id": rid, "object": "response", "deleted": True}, bd)
sg, _ = call("GET", "/v1/responses/" + rid, "A")
sp, _ = create("A", "x", previous_response_id=rid)
check("serve_store_deleted_is_gone", (sg, sp) == (404, 400), (sg, sp))

# input_items pagination
msgs = [{"role": "user", "content": "m%d" % i} for i in range(5)]
st, r = create("A", msgs)
lid = r["id"]
def items(q):
    st, b = call("GET", "/v1/responses/%s/input_items%s" % (lid, q), "A")
    return st, json.loads(b)
st, d = items("")
texts = [x["content"][0]["text"] for x in d["data"]]
check("serve_store_input_items_default_desc", st == 200 and texts == ["m4", "m3", "m2", "m1", "m0"]
      and d["object"] == "list" and not d["has_more"], d)
st, d1 = items("?order=asc&limit=2")
st, d2 = items("?order=asc&limit=2&after=" + d1["last_id"])
st, d3 = items("?order=asc&limit=2&after=" + d2["last_id"])
got = [x["content"][0]["text"] for x in d1["data"] + d2["data"] + d3["data"]]
check("serve_store_input_items_pages", got == ["m0", "m1", "m2", "m3", "m4"] and d1["has_more"]
      and d2["has_more"] and not d3["has_more"] and d1["first_id"] == d1["data"][0]["id"], (got, d1, d3))
st, _ = items("?limit=0")
st2, _ = items("?order=up")
st3, _ = items("?after=msg_nope")
check("serve_store_input_items_bad_params_400", (st, st2, st3) == (400, 400, 400), (st, st2, st3))

# the 99,000-part body: a few bytes in the store, not a copy of the parts
before = metric("k3_responses_store_bytes")
parts = [{"type": "input_text", "text": ""}] * 99000
st, r = create("C", [{"role": "user", "content": parts}])
after = metric("k3_responses_store_bytes")
check("serve_store_many_parts_ok", st == 200, (st, r if st != 200 else ""))
check("serve_store_many_parts_bounded", after is not None and before is not None and
      0 < after - before < 16384, (before, after))
st, b = call("GET", "/v1/responses/%s/input_items" % r["id"], "C")
d = json.loads(b)
check("serve_store_many_parts_one_item", st == 200 and len(d["data"]) == 1 and
      d["data"][0]["content"] == [{"type": "input_text", "text": ""}], b[:300])

# a flood from one scope evicts its own responses, not another scope's
st, keep = create("B", "B's only response")
budget = metric("k3_responses_store_budget_bytes")
pad = {"k%d" % i: "x" * 500 for i in range(16)}  # echoed in the kept response
flood = []
for i in range(160):  # 160 x ~8.5 KB > the 1 MiB budget
    st, r = create("A", "flood %d" % i, metadata=pad)
    flood.append(r["id"] if st == 200 else None)
check("serve_store_flood_served", all(flood), flood.count(None))
sk, _ = call("GET", "/v1/responses/" + keep["id"], "B")
check("serve_store_flood_other_scope_kept", sk == 200, sk)
s0, _ = call("GET", "/v1/responses/" + flood[0], "A")
sl, _ = call("GET", "/v1/responses/" + flood[-1], "A")
check("serve_store_flood_evicts_own_oldest", (s0, sl) == (404, 200), (s0, sl))
used, ev = metric("k3_responses_store_bytes"), metric("k3_responses_store_evictions_total")
check("serve_store_within_budget", used is not None and budget == 1 << 20 and used <= budget and ev > 0,
      (used, budget, ev))
PY
serve_stop || echo "FAIL serve_store_clean_exit"

# ---- several API keys: each its own scope ----
printf '# team keys\n\n  k3key  \n#k4\n' >"$KEYS"
serve_start --test-mode --api-key k1 --api-key k2 --api-key-file "$KEYS" ||
    { echo "FAIL serve_store_keys_start"; exit 1; }
python3 - "$SERVE_PORT" <<'PY' || echo "FAIL serve_store_keys_script (exit $?)"
import json, sys, urllib.request, urllib.error
URL = "http://127.0.0.1:%d" % int(sys.argv[1])

def check(name, ok, info=""):
    print(("PASS " if ok else "FAIL ") + name)
    if not ok:
        print("  " + str(info)[:400])

def call(method, path, hdrs, body=None):
    data = json.dumps(body).encode() if body is not None else None
    rq = urllib.request.Request(URL + path, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(rq, timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()

bearer = lambda k: {"Authorization": "Bearer " + k, "Content-Type": "application/json"}
body = {"model": "tiny", "input": "hi", "max_output_tokens": 2, "k3_test_force_text": "ok"}
made = {}
for k in ["k1", "k2", "k3key"]:
    st, b = call("POST", "/v1/responses", bearer(k), body)
    made[k] = json.loads(b)["id"] if st == 200 else None
check("serve_store_keys_each_accepted", all(made.values()), made)
for w in ["k4", "k1 ", "k", "k11", "#k4", ""]:
    st, _ = call("POST", "/v1/responses", bearer(w), body)
    check("serve_store_keys_wrong_401_%r" % w, st == 401, st)
ok = True
for k, rid in made.items():
    for other in made:
        st, _ = call("GET", "/v1/responses/" + rid, bearer(other))
        ok &= st == (200 if other == k else 404)
check("serve_store_keys_each_sees_own_only", ok, made)
st, _ = call("GET", "/v1/responses/" + made["k2"], {"x-api-key": "k2"})
check("serve_store_keys_x_api_key_same_scope", st == 200, st)
PY
serve_stop || echo "FAIL serve_store_keys_clean_exit"
